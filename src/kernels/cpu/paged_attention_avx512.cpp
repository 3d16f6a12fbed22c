// AVX-512 paged attention: paged_attention_simd.inc compiled with AVX-512, where its score and
// value loops take 16 lanes and give the AVX2 instance's bits.

#include "kernels/cpu/immintrin_avx512.h"

#define TOKAMAK_PAGED_SIMD_NS avx512
#include "kernels/cpu/paged_attention_simd.inc"
