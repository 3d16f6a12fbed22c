// AVX2 + FMA + F16C + AVX-VNNI packed matmul: the body of packed_matmul_avx2.inc, its integer
// sums by the VEX-encoded vpdpbusd.

#define TOKAMAK_PACKED_256_NS avxvnni
#include "kernels/cpu/packed_matmul_avx2.inc"
