#pragma once
// AVX2 dot products of the 5-bit and K-quant weight types against their activation encodings,
// and the AVX2 encoder of Q8_K activations (kquant_dots_avx2.cpp). Every result is bitwise
// equal to its scalar twin (kquant_dots.h; the Q8_K encoder's twin is quantize_row_q8_K_act in
// quantize.h). Call them only on CPUs with AVX2, FMA and F16C.
//
//   weights   activations   n
//   Q5_0      Q8_0          n % 32 == 0
//   Q5_1      Q8_1          n % 32 == 0
//   Q4_K      Q8_K          n % 256 == 0
//   Q5_K      Q8_K          n % 256 == 0
//   Q6_K      Q8_K          n % 256 == 0
//
// The K-quant dots read Q8_K's bsums, so the activation must hold bsums[i] = the sum of its
// quants [16i, 16i + 16), as the encoders write them.

#include <cstddef>
#include <cstdint>

namespace tokamak::cpu::avx2 {

float dot_q5_0_q8_0(int64_t n, const void* w, const void* x);
float dot_q5_1_q8_1(int64_t n, const void* w, const void* x);
float dot_q4_K_q8_K(int64_t n, const void* w, const void* x);
float dot_q5_K_q8_K(int64_t n, const void* w, const void* x);
float dot_q6_K_q8_K(int64_t n, const void* w, const void* x);

// Four weight rows (w_stride bytes apart) against one activation row, as VecDot4Fn
// (kernel_table.h): out[r] is bitwise equal to dot(n, w + r * w_stride, x).
void dot4_q5_0_q8_0(int64_t n, const void* w, size_t w_stride, const void* x, float* out);
void dot4_q4_K_q8_K(int64_t n, const void* w, size_t w_stride, const void* x, float* out);
void dot4_q5_K_q8_K(int64_t n, const void* w, size_t w_stride, const void* x, float* out);
void dot4_q6_K_q8_K(int64_t n, const void* w, size_t w_stride, const void* x, float* out);

// Encodes n floats (n % 256 == 0) as block_q8_K rows, bitwise equal to the scalar encoder.
void quantize_row_q8_K_act(const float* x, void* y, int64_t n);

}  // namespace tokamak::cpu::avx2
