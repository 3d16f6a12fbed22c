#pragma once
// The 256-bit kernels of the packed matmul (packed_weights.h; packed_matmul_avx2.inc), bitwise
// the AVX-512 ones: plain AVX2 (the AVX2 table's) and AVX2 with AVX-VNNI (the AVX-VNNI table's).
// The AVX-512 table replaces them but for Q6_K.

#include "kernels/cpu/packed_weights.h"

namespace tokamak::cpu::avx2 {

void packed_matmul_q4_0(const PackedMatmulArgs& args);  // Q4_0_X8 x Q8_0 activations
void packed_matmul_q4_1(const PackedMatmulArgs& args);  // Q4_1_X8 x Q8_1
void packed_matmul_q8_0(const PackedMatmulArgs& args);  // Q8_0_X8 x Q8_0
void packed_matmul_q6_k(const PackedMatmulArgs& args);  // Q6_K_X8 x Q8_0

}  // namespace tokamak::cpu::avx2

namespace tokamak::cpu::avxvnni {

void packed_matmul_q4_0(const PackedMatmulArgs& args);
void packed_matmul_q4_1(const PackedMatmulArgs& args);
void packed_matmul_q8_0(const PackedMatmulArgs& args);
void packed_matmul_q6_k(const PackedMatmulArgs& args);  // the maddubs path, as AVX2's

}  // namespace tokamak::cpu::avxvnni
