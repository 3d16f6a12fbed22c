#pragma once
// A tensor seen as rows, for the files of CpuOps (cpu_ops.cpp, cpu_ops_paged_attention.cpp).

#include <cassert>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tokamak::cpu_ops_detail {

// A tensor seen as rows of its innermost dimension: rows may be strided (stride[0] of a 2-D
// view), anything of higher rank must be contiguous.
struct Rows {
  uint8_t* data;
  int64_t n_rows;
  int64_t n_cols;
  int64_t stride;  // bytes between rows
  DType dtype;

  template <typename T>
  T* row(int64_t r) const {
    return reinterpret_cast<T*>(data + r * stride);
  }
};

inline Rows as_rows(const Tensor& t) {
  assert(t.rank >= 1 && t.device == Device::CPU && t.data != nullptr);
  const int64_t row = static_cast<int64_t>(row_bytes(t.dtype, t.row_size()));
  if (t.rank == 2) {
    assert(t.stride[1] == static_cast<int64_t>(dtype_info(t.dtype).type_size));
    assert(t.stride[0] >= row);
    return {static_cast<uint8_t*>(t.data), t.shape[0], t.shape[1], t.stride[0], t.dtype};
  }
  assert(t.is_contiguous());
  return {static_cast<uint8_t*>(t.data), t.n_rows(), t.row_size(), row, t.dtype};
}

}  // namespace tokamak::cpu_ops_detail
