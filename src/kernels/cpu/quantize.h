#pragma once
// Scalar encoders and decoders of every weight type, matching GGML's reference code
// (ggml-quants.c, `quantize_row_*_ref`) bit for bit, so that files we write are the files
// llama.cpp would write and so that the SIMD kernels have a reference to be tested against.
// n is the number of elements and must be a multiple of 32 for the block types.
//
// Activations are encoded differently from weights: ggml's CPU backend on x86 quantizes
// the activation rows of a Q8_0/Q4_0 (Q8_1 for Q4_1) matmul with id = 127/amax and rounds
// half to even (its AVX path), where the reference uses id = 1/(amax/127) and rounds half away
// from zero. quantize_row_q8_0_act / _q8_1_act reproduce the CPU backend; the kernel tables
// carry SIMD versions that equal them bit for bit.
//
// The K-quant weight encoders (Q4_K, Q5_K, Q6_K) are our own, simpler than llama.cpp's (which
// searches each sub-block's scale and min for the least error): each sub-block's range maps
// onto the codes directly. Files they write are valid GGUF that llama.cpp reads; the error is
// somewhat larger than llama-quantize's. The decoders are the format's, exact. Q8_K rows are
// activations only (quantize_row_q8_K_act: d = amax / 127 as a float, half to even).

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu {

// Weight encoders (GGML reference rounding).
void quantize_row_f16(const float* x, uint16_t* y, int64_t n);
void quantize_row_bf16(const float* x, uint16_t* y, int64_t n);
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n);
void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n);
void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n);
void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n);  // n % 256 == 0 (K-quants)
void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n);
void quantize_row_q6_K(const float* x, block_q6_K* y, int64_t n);

// Activation encoders (ggml-cpu's x86 rounding, see above).
void quantize_row_q8_0_act(const float* x, block_q8_0* y, int64_t n);
void quantize_row_q8_1_act(const float* x, block_q8_1* y, int64_t n);
void quantize_row_q8_K_act(const float* x, block_q8_K* y, int64_t n);

// Decoders.
void dequantize_row_f16(const uint16_t* x, float* y, int64_t n);
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n);
void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n);
void dequantize_row_q8_1(const block_q8_1* x, float* y, int64_t n);
void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n);
void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n);
void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n);
void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t n);
void dequantize_row_q8_K(const block_q8_K* x, float* y, int64_t n);

// By dtype (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; Q8_1 too, and
// Q8_K for dequantize_row): `y` / `x` hold row_bytes(dtype, n).
bool can_quantize(DType dtype);
void quantize_row(DType dtype, const float* x, void* y, int64_t n);
void dequantize_row(DType dtype, const void* x, float* y, int64_t n);

}  // namespace tokamak::cpu
