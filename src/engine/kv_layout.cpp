#include "engine/kv_layout.h"

#include <algorithm>

#include "engine/block_manager.h"
#include "model/model.h"

namespace tokamak {

KVDTypes stored_kv_dtypes(KVDTypes requested) {
  if (requested.k == KVDType::Q4) requested.k = KVDType::Q4C;
  return requested;
}

bool kv_dtype_is_quantized(KVDType dtype) {
  return dtype == KVDType::Int8 || dtype == KVDType::Fp8 || dtype == KVDType::Q4 ||
         dtype == KVDType::Q4C;
}

int32_t hot_window_blocks(int32_t block_size, KVDTypes requested, int32_t hot_window_tokens) {
  const int32_t bs = std::max(block_size, 1);
  const int32_t blocks = (std::max(hot_window_tokens, 0) + bs - 1) / bs;
  const KVDTypes stored = stored_kv_dtypes(requested);
  const bool whole_blocks = !kv_dtype_writes_rows(stored.k) || !kv_dtype_writes_rows(stored.v);
  return std::max(blocks, whole_blocks ? 1 : 0);
}

size_t KVLayout::hot_bytes() const {
  if (hot_window_blocks == 0) return 0;
  KVCacheShape hot = shape;
  hot.dtype = KVDType::F16;
  return size_t(n_hot_blocks) * hot.bytes_per_block();
}

PagedKVCache KVLayout::make(int32_t n_main_blocks) const {
  if (hot_window_blocks == 0) return PagedKVCache(shape, n_main_blocks);
  return PagedKVCache(shape, n_main_blocks, hot_window_blocks, n_hot_blocks);
}

KVLayout kv_layout(const Model& model, int32_t block_size, KVDTypes requested,
                   int32_t hot_window_tokens, int32_t max_seqs, int32_t max_batched_tokens) {
  KVLayout l;
  l.shape = model.kv_shape(block_size);
  l.shape.dtype = stored_kv_dtypes(requested);
  l.hot_window_blocks = hot_window_blocks(block_size, requested, hot_window_tokens);
  if (l.hot_window_blocks > 0) {
    l.n_hot_blocks = BlockManager::hot_blocks_needed(l.hot_window_blocks, block_size, max_seqs,
                                                     max_batched_tokens);
  }
  return l;
}

}  // namespace tokamak
