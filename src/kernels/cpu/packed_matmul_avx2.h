#pragma once
// The AVX2 kernels of the packed matmul (packed_weights.h; packed_matmul_avx2.cpp), bitwise
// the AVX-512 ones. The AVX2 kernel table hands them out (the AVX-512 table replaces them).

#include "kernels/cpu/packed_weights.h"

namespace tokamak::cpu::avx2 {

void packed_matmul_q4_0(const PackedMatmulArgs& args);  // Q4_0_X8 x Q8_0 activations
void packed_matmul_q4_1(const PackedMatmulArgs& args);  // Q4_1_X8 x Q8_1
void packed_matmul_q8_0(const PackedMatmulArgs& args);  // Q8_0_X8 x Q8_0
void packed_matmul_q6_k(const PackedMatmulArgs& args);  // Q6_K_X8 x Q8_0

}  // namespace tokamak::cpu::avx2
