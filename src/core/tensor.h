#pragma once
// Tensor: a non-owning view of an n-dimensional array (up to 4 dims) in some device's memory.
//
// Shapes are row-major, outermost dimension first, as the comments in the model write them:
// a (n_tokens, n_embd) activation has shape {n_tokens, n_embd} and row t starts at
// data + t * stride[0]. For a quantized dtype the innermost dimension counts elements (a
// multiple of the block size) and its rows are packed blocks; strides are in bytes.
//
// GGUF lists dimensions innermost first (GGML order); Tensor::from_ggml reverses them.

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "core/dtype.h"

namespace tokamak {

enum class Device { CPU = 0, CUDA = 1 };

struct Tensor {
  static constexpr int kMaxDims = 4;

  DType dtype = DType::F32;
  int rank = 0;
  std::array<int64_t, kMaxDims> shape{};   // outermost first
  std::array<int64_t, kMaxDims> stride{};  // in bytes, per dimension
  void* data = nullptr;
  Device device = Device::CPU;

  // A contiguous view of `data` with the given shape (outermost first).
  static Tensor contiguous(DType dtype, std::initializer_list<int64_t> dims, void* data,
                           Device device = Device::CPU) {
    return contiguous(dtype, std::span<const int64_t>(dims.begin(), dims.size()), data, device);
  }
  static Tensor contiguous(DType dtype, std::span<const int64_t> dims, void* data,
                           Device device = Device::CPU) {
    assert(!dims.empty() && dims.size() <= kMaxDims);
    Tensor t;
    t.dtype = dtype;
    t.rank = static_cast<int>(dims.size());
    t.data = data;
    t.device = device;
    for (int i = 0; i < t.rank; ++i) t.shape[i] = dims[i];
    int64_t step = static_cast<int64_t>(row_bytes(dtype, t.shape[t.rank - 1]));
    t.stride[t.rank - 1] = static_cast<int64_t>(dtype_info(dtype).type_size);
    for (int i = t.rank - 2; i >= 0; --i) {
      t.stride[i] = step;
      step *= t.shape[i];
    }
    return t;
  }
  // A contiguous view of a tensor whose dimensions are listed innermost first (GGUF).
  static Tensor from_ggml(DType dtype, std::span<const int64_t> ggml_dims, const void* data) {
    assert(!ggml_dims.empty() && ggml_dims.size() <= kMaxDims);
    std::array<int64_t, kMaxDims> dims{};
    const size_t n = ggml_dims.size();
    for (size_t i = 0; i < n; ++i) dims[i] = ggml_dims[n - 1 - i];
    return contiguous(dtype, std::span<const int64_t>(dims.data(), n), const_cast<void*>(data));
  }

  int64_t dim(int i) const {
    assert(i >= 0 && i < rank);
    return shape[i];
  }
  int64_t n_elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  // Rows = product of all dimensions but the innermost; each row is contiguous.
  int64_t n_rows() const { return rank == 0 ? 0 : n_elements() / shape[rank - 1]; }
  int64_t row_size() const { return rank == 0 ? 0 : shape[rank - 1]; }
  bool is_contiguous() const {
    if (rank == 0) return true;
    if (stride[rank - 1] != static_cast<int64_t>(dtype_info(dtype).type_size)) return false;
    int64_t step = static_cast<int64_t>(row_bytes(dtype, shape[rank - 1]));
    for (int i = rank - 2; i >= 0; --i) {
      if (stride[i] != step) return false;
      step *= shape[i];
    }
    return true;
  }
  size_t nbytes() const { return row_bytes(dtype, row_size()) * static_cast<size_t>(n_rows()); }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // Start of row r of a contiguous tensor viewed as (n_rows, row_size).
  template <typename T = uint8_t>
  T* row(int64_t r) const {
    assert(r >= 0 && r < n_rows());
    return reinterpret_cast<T*>(static_cast<uint8_t*>(data) +
                                r * static_cast<int64_t>(row_bytes(dtype, row_size())));
  }
};

}  // namespace tokamak
