#pragma once
// Matrix multiplication y = x · wᵀ on raw pointers, the way ggml's CPU backend does it:
// the activation rows x (m, k) F32 are first encoded in the activation type that goes with
// the weight type (convert_rows), then every output element y[i][j] is the kernel table's
// dot product of weight row j and encoded activation row i. Each element is computed by the
// kernel's dot, dot4 or dot4xr (a tile of 4 weight rows by kTileActRows activation rows),
// which give the same bits: it does not depend on m, on the tiling or on the thread split.
//
//   weight dtype   activation encoding
//   F32            F32 (used as is)
//   F16            F16
//   BF16           BF16
//   Q8_0, Q4_0     Q8_0
//   Q5_0           Q8_0
//   Q4_1, Q5_1     Q8_1
//   Q4_K, Q5_K     Q8_K (super-blocks of 256: a row's length must be a multiple of 256)
//   Q6_K           Q8_K

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/kernel_table.h"

namespace tokamak::cpu {

// True for the weight dtypes above (not for the packed ones, which only Ops make).
bool matmul_supports(DType wtype);

// The packed type this level computes wtype weights in (packed_weights.h), or wtype itself
// when the level keeps GGUF's layout for it.
DType packed_weight_dtype(const KernelTable& kt, DType wtype);

// The level's kernel for packed weights of type `packed` (never null for a type that
// packed_weight_dtype returned).
PackedMatmulFn packed_matmul_kernel(const KernelTable& kt, DType packed);

DType activation_dtype(DType wtype);  // packed types: their base type's

// Encodes rows [r0, r1) of x (rows of k floats, row stride x_stride floats) into `xq`, whose
// rows are row_bytes(activation_dtype(wtype), k) bytes apart. Not for F32 weights.
void convert_rows(const KernelTable& kt, DType wtype, const float* x, int64_t x_stride, int64_t k,
                  int64_t r0, int64_t r1, void* xq);

// y[i * y_stride + j] = dot(w row j, xq row i) for i in [0, m) and j in [j0, j1).
// w rows are w_stride bytes apart; xq rows xq_stride bytes apart (encoded as above).
void matmul_rows(const KernelTable& kt, DType wtype, const void* w, size_t w_stride, const void* xq,
                 size_t xq_stride, int64_t m, int64_t k, int64_t j0, int64_t j1, float* y,
                 int64_t y_stride);

}  // namespace tokamak::cpu
