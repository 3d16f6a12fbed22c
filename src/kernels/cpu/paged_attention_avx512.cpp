// AVX-512 paged attention: paged_attention_simd.inc compiled with AVX-512, where its score and
// value loops take 16 lanes and give the AVX2 instance's bits.

// GCC 12 warns inside its own AVX-512 headers (see kernels_avx512.cpp): silenced for them only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#define TOKAMAK_PAGED_SIMD_NS avx512
#include "kernels/cpu/paged_attention_simd.inc"
