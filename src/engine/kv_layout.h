#pragma once
// How the engine lays out its KV cache for the dtypes asked for (--kv-dtype) and the hot
// window (--kv-hot-window): what the main pool stores, how many blocks of each sequence are
// also kept in F16, and how many hot blocks that takes (kv/paged_kv_cache.h). The serving
// engine and `tokamak perplexity` build their caches through it, so a dtype is judged as it
// serves.

#include <cstddef>
#include <cstdint>

#include "core/kv_dtype.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {

class Model;

// What the main pool stores for the requested dtypes: q4 keys become KVDType::Q4C (per
// channel across each block's tokens, KIVI), which cost +1.3% perplexity on the default
// model where per-token q4 keys cost +4.5% (docs/BENCHMARKS.md, "KV dtypes").
KVDTypes stored_kv_dtypes(KVDTypes requested);

// int8, fp8, q4, q4c: the dtypes a hot window keeps the newest tokens exact for.
bool kv_dtype_is_quantized(KVDType dtype);

// The hot window in blocks (0: none): hot_window_tokens in whole blocks (the block being
// filled counted), and at least one when the stored keys or values are encoded per block.
// block_size >= 1.
int32_t hot_window_blocks(int32_t block_size, KVDTypes requested, int32_t hot_window_tokens);

struct KVLayout {
  KVCacheShape shape;             // the main pool's, in the stored dtypes
  int32_t hot_window_blocks = 0;  // 0: no hot copies
  int32_t n_hot_blocks = 0;       // of the hot cache, for every running sequence at once

  size_t hot_bytes() const;  // of the hot cache (F16)
  // The cache with n_main_blocks main blocks (and the hot cache). Throws as PagedKVCache.
  PagedKVCache make(int32_t n_main_blocks) const;
};

// For up to max_seqs sequences running steps of up to max_batched_tokens tokens in all.
KVLayout kv_layout(const Model& model, int32_t block_size, KVDTypes requested,
                   int32_t hot_window_tokens, int32_t max_seqs, int32_t max_batched_tokens);

}  // namespace tokamak
