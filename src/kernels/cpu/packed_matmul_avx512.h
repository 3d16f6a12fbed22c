#pragma once
// The AVX-512 VNNI kernels of the packed matmul (packed_weights.h; packed_matmul_avx512.cpp).
// Only the AVX-512 kernel table hands them out: they run only on CPUs with AVX-512 VNNI.

#include "kernels/cpu/packed_weights.h"

namespace tokamak::cpu::avx512 {

void packed_matmul_q4_0(const PackedMatmulArgs& args);  // Q4_0_X8 x Q8_0 activations
void packed_matmul_q4_1(const PackedMatmulArgs& args);  // Q4_1_X8 x Q8_1
void packed_matmul_q8_0(const PackedMatmulArgs& args);  // Q8_0_X8 x Q8_0

}  // namespace tokamak::cpu::avx512
