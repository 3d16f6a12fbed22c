#pragma once
// RMS normalisation of rows, as ggml computes it: the sum of squares in double, one element
// after the other, then y = (x * (1 / sqrt(mean + eps))) * w, each product rounded to float.

#include <cstdint>

namespace tokamak::cpu {

// y (n) = rmsnorm(x (n)) * w (n); y may alias x.
void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps);

// scales[r] = 1 / sqrt(mean(x_r^2) + eps) for rows [0, rows) of x (rows x_stride floats
// apart): the factor rmsnorm_row multiplies row r by, the same float. A row's sum is a chain
// of dependent double adds, latency-bound at ~1 ns an element; rows run eight at a time here,
// eight chains side by side, each in its row's own order.
void rmsnorm_scales(const float* x, int64_t x_stride, int64_t rows, int64_t n, float eps,
                    float* scales);

// The scale of a row of n elements whose squares sum to `sum` (rmsnorm_scales' last step, for
// the SIMD forms of the sum). Out of line on purpose: an inline copy compiled into an AVX-512
// file could be the one the linker keeps for every caller (see kernels_avx512.cpp).
float rmsnorm_scale_of_sum(double sum, int64_t n, float eps);

// y (n) = (x * scale) * w, elementwise: the second half of rmsnorm_row. y may alias x.
void rmsnorm_apply(const float* x, float scale, const float* w, float* y, int64_t n);

}  // namespace tokamak::cpu
