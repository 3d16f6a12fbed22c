#pragma once
// The quantized dot products of the AVX-512 table (quant_dots_avx512.cpp): dot, dot4 and dot4xr
// for Q4_0, Q4_1 and Q8_0 weights, each bitwise equal to the AVX2 table's. Only the AVX-512
// table (kernels_avx512.cpp) may hand them out: they run only on CPUs with AVX-512 VNNI.

#include "kernels/cpu/kernel_table.h"

namespace tokamak::cpu::avx512 {

DotKernel q4_0_dots();  // weights Q4_0, activations Q8_0
DotKernel q4_1_dots();  // weights Q4_1, activations Q8_1
DotKernel q8_0_dots();  // weights Q8_0, activations Q8_0

}  // namespace tokamak::cpu::avx512
