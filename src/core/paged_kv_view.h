#pragma once
// One layer of the paged KV cache, as kernels see it: raw pools addressed by block id, in
// the KV dtype of core/kv_dtype.h. The storage and its bookkeeping live in kv/
// (paged_kv_cache.h, block_pool.h); this view is all that ops and kernels need, so they stay
// independent of the engine.
//
// Layout of one layer (keys; values alike with head_dim_v), each row row_bytes wide:
//
//   k[block][kv_head][token][row bytes]     block in [0, n_blocks), token in [0, block_size)
//   k_scales[block][kv_head][tile scale bytes]   (int8, fp8, q4 only)
//
//   block b ┌──────── kv_head 0 ───────┬──────── kv_head 1 ───────┬ ...
//           │ tok 0: d0 d1 ... d(hd-1) │ tok 0: ...               │
//           │ tok 1: ...               │ ...                      │
//           │ ...  (block_size rows)   │                          │
//           └──────────────────────────┴──────────────────────────┴
//
// Why this order: attention walks one KV head of one sequence block by block, so the keys it
// reads for a block are one contiguous (block_size, row_bytes) tile (2 KiB for 16 x 64 F16),
// and a query group (the query heads sharing a KV head) reuses that tile while it is in L1.
// Writing a new token touches n_head_kv rows, which is cheap by comparison. Every F16 tile
// starts 64-byte aligned when head_dim * 2 * block_size is a multiple of 64 (the pool base
// is aligned). Scales live apart so that the element tiles keep that alignment.

#include <climits>
#include <cstddef>
#include <cstdint>

#include "core/kv_dtype.h"

namespace tokamak {

struct PagedKVView {
  uint8_t* k = nullptr;            // (n_blocks, n_head_kv, block_size, k_row_bytes())
  uint8_t* v = nullptr;            // (n_blocks, n_head_kv, block_size, v_row_bytes())
  uint8_t* k_scales = nullptr;     // (n_blocks, n_head_kv, k_tile_scale_bytes()); may be null
  uint8_t* v_scales = nullptr;     // when the dtype has no scales
  KVDTypes dtypes = KVDType::F16;  // of keys and of values
  int32_t n_blocks = 0;
  int32_t block_size = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;

  // Hot window (kv/paged_kv_cache.h): the F16 pools of the hot copies, same layout with
  // hot_n_blocks blocks and no scales, and the window in blocks: a query at position p
  // reads blocks [0, c) here and the rest from the hot copies, c = max(0, p / block_size -
  // hot_window_blocks + 1). Null / 0 without one.
  uint8_t* hot_k = nullptr;
  uint8_t* hot_v = nullptr;
  int32_t hot_n_blocks = 0;
  int32_t hot_window_blocks = 0;

  // The hot copies' pools as a view of their own (no hot window of theirs).
  PagedKVView hot_view() const {
    PagedKVView h;
    h.k = hot_k;
    h.v = hot_v;
    h.dtypes = KVDType::F16;
    h.n_blocks = hot_n_blocks;
    h.block_size = block_size;
    h.n_head_kv = n_head_kv;
    h.head_dim_k = head_dim_k;
    h.head_dim_v = head_dim_v;
    return h;
  }
  // Blocks of the main pool that the query at `position` reads (the rest are hot).
  int32_t cold_blocks(int64_t position) const {
    const int64_t c = position / block_size - hot_window_blocks + 1;
    return hot_window_blocks == 0 ? INT32_MAX : static_cast<int32_t>(c > 0 ? c : 0);
  }

  size_t k_row_bytes() const { return kv_row_bytes(dtypes.k, head_dim_k); }
  size_t v_row_bytes() const { return kv_row_bytes(dtypes.v, head_dim_v); }
  size_t k_tile_scale_bytes() const {
    return kv_tile_scale_bytes(dtypes.k, block_size, head_dim_k);
  }
  size_t v_tile_scale_bytes() const {
    return kv_tile_scale_bytes(dtypes.v, block_size, head_dim_v);
  }

  // Bytes between consecutive KV heads / blocks in k and v.
  size_t k_head_stride() const { return size_t(block_size) * k_row_bytes(); }
  size_t v_head_stride() const { return size_t(block_size) * v_row_bytes(); }
  size_t k_block_stride() const { return size_t(n_head_kv) * k_head_stride(); }
  size_t v_block_stride() const { return size_t(n_head_kv) * v_head_stride(); }
  // Bytes between consecutive blocks in k_scales and v_scales.
  size_t k_scale_block_stride() const { return size_t(n_head_kv) * k_tile_scale_bytes(); }
  size_t v_scale_block_stride() const { return size_t(n_head_kv) * v_tile_scale_bytes(); }

  // The (block_size, row bytes) tile of one block and KV head, and its scales.
  uint8_t* k_tile(int32_t block, int32_t kv_head) const {
    return k + block * k_block_stride() + kv_head * k_head_stride();
  }
  uint8_t* v_tile(int32_t block, int32_t kv_head) const {
    return v + block * v_block_stride() + kv_head * v_head_stride();
  }
  uint8_t* k_tile_scales(int32_t block, int32_t kv_head) const {
    return k_scales + block * k_scale_block_stride() + kv_head * k_tile_scale_bytes();
  }
  uint8_t* v_tile_scales(int32_t block, int32_t kv_head) const {
    return v_scales + block * v_scale_block_stride() + kv_head * v_tile_scale_bytes();
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
  // Optional (null: not tracked): one float per block-table entry, to which the attention
  // call adds, for every query and query head, the softmax weight each block received (its
  // tokens' probabilities summed): the accumulated attention that heavy-hitter eviction
  // ranks blocks by (engine/kv_heavy.h). Summed in a fixed order, whatever the threads.
  float* block_mass = nullptr;
  // Hot window only: the hot copies of table entries [hot_first, ...), blocks of the hot
  // pools (PagedKVView::hot_k / hot_v); they cover every entry a query reads hot.
  const int32_t* hot_block_table = nullptr;
  int32_t hot_first = 0;
};

// A block filled by a step under a hot window: its F16 hot copy is encoded into its block of
// the main pool (in the main dtype) once all its rows are written.
struct KVBlockEncode {
  int32_t hot = 0;
  int32_t main = 0;
};

}  // namespace tokamak
