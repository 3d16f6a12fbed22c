// AVX2 + FMA + F16C paged attention: the SIMD body of paged_attention_simd.inc.

#define TOKAMAK_PAGED_SIMD_NS avx2
#include "kernels/cpu/paged_attention_simd.inc"
