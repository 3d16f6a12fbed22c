#pragma once
// Scalar dot products of the 5-bit and K-quant weight types against their activation
// encodings (quant_blocks.h): the reference the SIMD kernels are tested against, and the
// path on CPUs without AVX2.
//
//   weights   activations   per block (32) or super-block (256), in block order:
//   Q5_0      Q8_0          sum += float(sumi) * (dw * dx)
//   Q5_1      Q8_1          sum += float(sumi) * (dw * dx) + mw * sx
//   Q4_K      Q8_K          sum += (dx * d) * float(sumi);  sum -= (dx * dmin) * float(summ)
//   Q5_K      Q8_K          as Q4_K
//   Q6_K      Q8_K          sum += (dx * d) * float(sumi)
//
// sumi is the block's exact integer sum: of q * x for the 32-element types; of each
// sub-block's scale times its sum of q * x for the K-quants (q - 32 for Q6_K); summ is the sum
// of each Q4_K / Q5_K sub-block's min times its activation sum (two of Q8_K's bsums). The
// integer sums are exact in any order, so a SIMD kernel that forms them and then runs these
// float steps gives the same bits.

#include <cstdint>

namespace tokamak::cpu::scalar {

float dot_q5_0_q8_0(int64_t n, const void* w, const void* x);
float dot_q5_1_q8_1(int64_t n, const void* w, const void* x);
float dot_q4_K_q8_K(int64_t n, const void* w, const void* x);
float dot_q5_K_q8_K(int64_t n, const void* w, const void* x);
float dot_q6_K_q8_K(int64_t n, const void* w, const void* x);

}  // namespace tokamak::cpu::scalar
