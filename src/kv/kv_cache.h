#pragma once
// KV cache of one sequence: contiguous F16 storage allocated once (llama.cpp's default KV
// type), written by the model as it runs a batch and read back by attention.
//
//   keys   (n_layer, n_ctx, k_dim)  F16   k_dim = n_head_kv * head_dim_k
//   values (n_layer, n_ctx, v_dim)  F16   v_dim = n_head_kv * head_dim_v
//
// Positions [0, size()) are filled. A forward pass writes the rows of its new positions in
// every layer (key_rows / value_rows), attends over [0, last new position], then advance()s
// size() past them once. The paged cache of the serving engine will replace this class;
// the model sees only the views below.

#include <cstdint>

#include "core/aligned_buffer.h"
#include "core/tensor.h"

namespace tokamak {

class KVCache {
 public:
  KVCache(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim);

  int32_t n_layer() const { return n_layer_; }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t k_dim() const { return k_dim_; }
  int32_t v_dim() const { return v_dim_; }
  int32_t size() const { return size_; }  // positions filled

  // (n_ctx, k_dim) / (n_ctx, v_dim) F16 views of one layer; rows [0, size()) are valid.
  Tensor keys(int32_t layer) const;
  Tensor values(int32_t layer) const;

  // Rows [pos, pos + n) of one layer, where a forward pass writes its new K / V.
  Tensor key_rows(int32_t layer, int32_t pos, int32_t n) const;
  Tensor value_rows(int32_t layer, int32_t pos, int32_t n) const;

  // Marks n more positions filled; size() + n <= n_ctx().
  void advance(int32_t n);
  // Forgets positions [n, size()): n <= size().
  void truncate(int32_t n);
  void clear() { size_ = 0; }

 private:
  uint16_t* layer_base(const AlignedBuffer<uint16_t>& buf, int32_t layer, int32_t dim) const;

  int32_t n_layer_;
  int32_t n_ctx_;
  int32_t k_dim_;
  int32_t v_dim_;
  int32_t size_ = 0;
  AlignedBuffer<uint16_t> k_;
  AlignedBuffer<uint16_t> v_;
};

}  // namespace tokamak
