#include "kv/kv_cache.h"

#include <cassert>

namespace tokamak {

KVCache::KVCache(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      k_dim_(k_dim),
      v_dim_(v_dim),
      k_(static_cast<size_t>(n_layer) * static_cast<size_t>(n_ctx) * static_cast<size_t>(k_dim)),
      v_(static_cast<size_t>(n_layer) * static_cast<size_t>(n_ctx) * static_cast<size_t>(v_dim)) {
  assert(n_layer > 0 && n_ctx > 0 && k_dim > 0 && v_dim > 0);
}

uint16_t* KVCache::layer_base(const AlignedBuffer<uint16_t>& buf, int32_t layer,
                              int32_t dim) const {
  assert(layer >= 0 && layer < n_layer_);
  return const_cast<uint16_t*>(buf.data()) +
         static_cast<size_t>(layer) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(dim);
}

Tensor KVCache::keys(int32_t layer) const {
  return Tensor::contiguous(DType::F16, {n_ctx_, k_dim_}, layer_base(k_, layer, k_dim_));
}

Tensor KVCache::values(int32_t layer) const {
  return Tensor::contiguous(DType::F16, {n_ctx_, v_dim_}, layer_base(v_, layer, v_dim_));
}

Tensor KVCache::key_rows(int32_t layer, int32_t pos, int32_t n) const {
  assert(pos >= 0 && n >= 0 && pos + n <= n_ctx_);
  return Tensor::contiguous(DType::F16, {n, k_dim_},
                            layer_base(k_, layer, k_dim_) + static_cast<size_t>(pos) * k_dim_);
}

Tensor KVCache::value_rows(int32_t layer, int32_t pos, int32_t n) const {
  assert(pos >= 0 && n >= 0 && pos + n <= n_ctx_);
  return Tensor::contiguous(DType::F16, {n, v_dim_},
                            layer_base(v_, layer, v_dim_) + static_cast<size_t>(pos) * v_dim_);
}

void KVCache::advance(int32_t n) {
  assert(n >= 0 && size_ + n <= n_ctx_);
  size_ += n;
}

void KVCache::truncate(int32_t n) {
  assert(n >= 0 && n <= size_);
  size_ = n;
}

}  // namespace tokamak
