// RoPE's rotation with AVX2 + FMA (rope.h). Eight floats are four (x0, x1) pairs, and the
// row of cos/sin holds (c, s) pairs in the same places, so
//   x0' = fma(x0, c, -(x1 * s)),  x1' = fma(x0, s, x1 * c)
// is one fma of (x0 x0 ..) by (c s ..) plus (x1 x1 ..) times (-s c ..): the scalar form's
// roundings, lane by lane.

#include <immintrin.h>

#include "kernels/cpu/rope.h"

namespace tokamak::cpu::avx2 {

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int32_t n_rot, const float* cos_sin) {
  const __m256 negate_even = _mm256_castsi256_ps(
      _mm256_setr_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0));
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    int32_t i = 0;
    for (; i + 8 <= n_rot; i += 8) {
      const __m256 xv = _mm256_loadu_ps(v + i);
      const __m256 cs = _mm256_loadu_ps(cos_sin + i);                             // c s
      const __m256 sc = _mm256_xor_ps(_mm256_permute_ps(cs, 0xb1), negate_even);  // -s c
      const __m256 rest = _mm256_mul_ps(_mm256_movehdup_ps(xv), sc);              // x1 * ..
      _mm256_storeu_ps(v + i, _mm256_fmadd_ps(_mm256_moveldup_ps(xv), cs, rest));
    }
    rope_rotate_pairs(v, i, n_rot, cos_sin);
  }
}

}  // namespace tokamak::cpu::avx2
