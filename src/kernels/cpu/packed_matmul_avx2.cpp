// AVX2 + FMA + F16C packed matmul: the body of packed_matmul_avx2.inc, its integer sums by
// vpmaddubsw.

#define TOKAMAK_PACKED_256_NS avx2
#include "kernels/cpu/packed_matmul_avx2.inc"
