#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cassert>

namespace tokamak::cpu {
namespace {

const DotKernel* dot_for(const KernelTable& kt, DType wtype) {
  switch (wtype) {
    case DType::F32:
      return &kt.f32;
    case DType::F16:
      return &kt.f16;
    case DType::BF16:
      return &kt.bf16;
    case DType::Q8_0:
      return &kt.q8_0;
    case DType::Q4_0:
      return &kt.q4_0;
    case DType::Q4_1:
      return &kt.q4_1;
    case DType::Q5_0:
      return &kt.q5_0;
    case DType::Q5_1:
      return &kt.q5_1;
    case DType::Q4_K:
      return &kt.q4_k;
    case DType::Q5_K:
      return &kt.q5_k;
    case DType::Q6_K:
      return &kt.q6_k;
    default:
      return nullptr;
  }
}

// The encoder of wtype's activations (activation_dtype).
ConvertFn convert_for(const KernelTable& kt, DType wtype) {
  switch (activation_dtype(wtype)) {
    case DType::F16:
      return kt.to_f16;
    case DType::BF16:
      return kt.to_bf16;
    case DType::Q8_0:
      return kt.to_q8_0;
    case DType::Q8_1:
      return kt.to_q8_1;
    case DType::Q8_K:
      return kt.to_q8_K;
    default:
      return nullptr;
  }
}

// Bytes of weight rows per tile: a tile stays in L1 while every activation row passes over it
// (the activations, up to ~100 KB for 64 rows, stay in L2).
constexpr size_t kTileBytes = 16 * 1024;

}  // namespace

bool matmul_supports(DType wtype) {
  return dot_for(scalar_kernel_table(), wtype) != nullptr;
}

PackedMatmulFn packed_matmul_kernel(const KernelTable& kt, DType packed) {
  switch (packed) {
    case DType::Q4_0_X8:
      return kt.q4_0x8;
    case DType::Q4_1_X8:
      return kt.q4_1x8;
    case DType::Q8_0_X8:
      return kt.q8_0x8;
    case DType::Q6_K_X8:
      return kt.q6_kx8;
    default:
      return nullptr;
  }
}

DType packed_weight_dtype(const KernelTable& kt, DType wtype) {
  const DType packed = packed_dtype(wtype);
  return packed != wtype && packed_matmul_kernel(kt, packed) != nullptr ? packed : wtype;
}

DType activation_dtype(DType wtype) {
  switch (wtype) {
    case DType::F16:
      return DType::F16;
    case DType::BF16:
      return DType::BF16;
    // 8-bit quants in blocks of 32 with one scale; Q6_K_X8 among them (its sub-block scales are
    // the weights').
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0_X8:
    case DType::Q4_0_X8:
    case DType::Q6_K_X8:
      return DType::Q8_0;
    // The same with the block's sum, for the weights' min term.
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_1_X8:
      return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return DType::Q8_K;
    default:
      return DType::F32;
  }
}

void convert_rows(const KernelTable& kt, DType wtype, const float* x, int64_t x_stride, int64_t k,
                  int64_t r0, int64_t r1, void* xq) {
  const ConvertFn convert = convert_for(kt, wtype);
  assert(convert != nullptr);
  const size_t row = row_bytes(activation_dtype(wtype), k);
  for (int64_t r = r0; r < r1; ++r) {
    convert(x + r * x_stride, static_cast<uint8_t*>(xq) + static_cast<size_t>(r) * row, k);
  }
}

void matmul_rows(const KernelTable& kt, DType wtype, const void* w, size_t w_stride, const void* xq,
                 size_t xq_stride, int64_t m, int64_t k, int64_t j0, int64_t j1, float* y,
                 int64_t y_stride) {
  const DotKernel* kernel = dot_for(kt, wtype);
  assert(kernel != nullptr);
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(xq);
  const auto w_row = [&](int64_t j) { return wb + static_cast<size_t>(j) * w_stride; };
  const auto x_row = [&](int64_t i) { return xb + static_cast<size_t>(i) * xq_stride; };
  // dot, dot4 and dot4xr give the same bits for an element: which one computes it is free.
  // Tiles of weight rows, a multiple of 4 rows each; in a tile, blocks of four weight rows by
  // kTileActRows activation rows, then the activation rows left over by four weight rows,
  // and the weight rows left over at the end one by one.
  const int64_t tile = std::max<int64_t>(
      4, static_cast<int64_t>(kTileBytes / std::max<size_t>(w_stride, 1)) / 4 * 4);
  for (int64_t t0 = j0; t0 < j1; t0 += tile) {
    const int64_t t1 = std::min(j1, t0 + tile);
    const int64_t t4 = t0 + (t1 - t0) / 4 * 4;
    int64_t i = 0;
    for (; i + kTileActRows <= m; i += kTileActRows) {
      for (int64_t j = t0; j < t4; j += 4) {
        kernel->dot4xr(k, w_row(j), w_stride, x_row(i), xq_stride, y + i * y_stride + j, y_stride);
      }
    }
    for (; i < m; ++i) {
      for (int64_t j = t0; j < t4; j += 4) {
        kernel->dot4(k, w_row(j), w_stride, x_row(i), y + i * y_stride + j);
      }
    }
    for (i = 0; i < m; ++i) {
      for (int64_t j = t4; j < t1; ++j) y[i * y_stride + j] = kernel->dot(k, w_row(j), x_row(i));
    }
  }
}

}  // namespace tokamak::cpu
