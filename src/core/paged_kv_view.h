#pragma once
// One layer of the paged KV cache, as kernels see it: raw F16 pools addressed by block id.
// The storage and its bookkeeping live in kv/ (paged_kv_cache.h, block_pool.h); this view is
// all that ops and kernels need, so they stay independent of the engine.
//
// Layout of one layer (keys; values alike with head_dim_v):
//
//   k[block][kv_head][token][d]     block in [0, n_blocks), token in [0, block_size)
//
//   block b ┌──────── kv_head 0 ───────┬──────── kv_head 1 ───────┬ ...
//           │ tok 0: d0 d1 ... d(hd-1) │ tok 0: ...               │
//           │ tok 1: ...               │ ...                      │
//           │ ...  (block_size rows)   │                          │
//           └──────────────────────────┴──────────────────────────┴
//
// Why this order: attention walks one KV head of one sequence block by block, so the keys it
// reads for a block are one contiguous (block_size, head_dim) tile (2 KiB for 16 x 64 F16),
// and a query group (the query heads sharing a KV head) reuses that tile while it is in L1.
// Writing a new token touches n_head_kv rows of head_dim, which is cheap by comparison.
// Every tile starts 64-byte aligned when head_dim * 2 * block_size is a multiple of 64 (the
// pool base is aligned).

#include <cstddef>
#include <cstdint>

namespace tokamak {

struct PagedKVView {
  uint16_t* k = nullptr;  // F16 (n_blocks, n_head_kv, block_size, head_dim_k)
  uint16_t* v = nullptr;  // F16 (n_blocks, n_head_kv, block_size, head_dim_v)
  int32_t n_blocks = 0;
  int32_t block_size = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;

  // Elements between consecutive blocks / KV heads in k and v.
  size_t k_block_stride() const { return size_t(n_head_kv) * block_size * head_dim_k; }
  size_t v_block_stride() const { return size_t(n_head_kv) * block_size * head_dim_v; }
  size_t k_head_stride() const { return size_t(block_size) * head_dim_k; }
  size_t v_head_stride() const { return size_t(block_size) * head_dim_v; }

  // The (block_size, head_dim) tile of one block and KV head.
  const uint16_t* k_tile(int32_t block, int32_t kv_head) const {
    return k + block * k_block_stride() + kv_head * k_head_stride();
  }
  const uint16_t* v_tile(int32_t block, int32_t kv_head) const {
    return v + block * v_block_stride() + kv_head * v_head_stride();
  }
};

// One sequence's part of a ragged attention call: its queries are rows
// [query_start, query_start + n_query) of the step's flat batch and are the last n_query of
// its context_len tokens (whose K/V are all in the cache already, this step's included), so
// query i attends causally to tokens [0, context_len - n_query + i].
struct SeqAttention {
  int32_t query_start = 0;
  int32_t n_query = 0;
  int32_t context_len = 0;
  const int32_t* block_table = nullptr;  // ceil(context_len / block_size) block ids
};

}  // namespace tokamak
