// rmsnorm_scales on AVX-512. The scalar form keeps eight rows' double sums side by side in
// scalar registers, four instructions an element and row (load, square, widen, add). Here a
// block of eight elements of eight rows is transposed in registers so that one vector holds
// element i of the eight rows, squared in float, widened to eight doubles and added to the
// eight rows' sums at once: the same operations in the same order for every row, so the same
// bits (RowKernelsTest checks every level against the scalar loop). Two groups of eight rows
// run together to cover the double add's latency. Rows short of a group of eight go to the
// scalar form. A normed matmul input (RMSNorm fused into its encoding) spent about half its
// encoding time in the scalar form on the Intel AMX guest; a 512-row call of the default model
// took 419K TSC ticks of its threads' time in it, 181K here (rdtsc, 4 prompts).

#include "kernels/cpu/rmsnorm_avx512.h"

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/rmsnorm.h"

namespace tokamak::cpu::avx512 {
namespace {

constexpr int kRows = 8;  // rows of a group: the lanes of a double register

// v[i] = element i of the 8 rows (lane r = row r), from r[j] = 8 elements of row j.
inline void transpose8(const __m256 (&r)[kRows], __m256 (&v)[kRows]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
  const __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
  const __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
  const __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
  const __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

inline __m512d add_square(__m512d sum, __m256 v) {
  return _mm512_add_pd(sum, _mm512_cvtps_pd(_mm256_mul_ps(v, v)));
}

// The scales of G groups of eight rows from x on (rows x_stride floats apart).
template <int G>
void scales_of_groups(const float* x, int64_t x_stride, int64_t n, float eps, float* scales) {
  __m512d sum[G];
  for (int g = 0; g < G; ++g) sum[g] = _mm512_setzero_pd();
  const auto row = [&](int g, int r) { return x + (g * kRows + r) * x_stride; };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v[G][kRows];
    for (int g = 0; g < G; ++g) {
      __m256 r[kRows];
      for (int j = 0; j < kRows; ++j) r[j] = _mm256_loadu_ps(row(g, j) + i);
      transpose8(r, v[g]);
    }
    for (int e = 0; e < 8; ++e) {
      for (int g = 0; g < G; ++g) sum[g] = add_square(sum[g], v[g][e]);
    }
  }
  for (; i < n; ++i) {
    for (int g = 0; g < G; ++g) {
      const __m256 v = _mm256_setr_ps(row(g, 0)[i], row(g, 1)[i], row(g, 2)[i], row(g, 3)[i],
                                      row(g, 4)[i], row(g, 5)[i], row(g, 6)[i], row(g, 7)[i]);
      sum[g] = add_square(sum[g], v);
    }
  }
  for (int g = 0; g < G; ++g) {
    alignas(64) double s[kRows];
    _mm512_store_pd(s, sum[g]);
    for (int r = 0; r < kRows; ++r) scales[g * kRows + r] = rmsnorm_scale_of_sum(s[r], n, eps);
  }
}

}  // namespace

void rmsnorm_scales(const float* x, int64_t x_stride, int64_t rows, int64_t n, float eps,
                    float* scales) {
  int64_t r = 0;
  for (; r + 2 * kRows <= rows; r += 2 * kRows) {
    scales_of_groups<2>(x + r * x_stride, x_stride, n, eps, scales + r);
  }
  if (r + kRows <= rows) {
    scales_of_groups<1>(x + r * x_stride, x_stride, n, eps, scales + r);
    r += kRows;
  }
  if (r < rows) cpu::rmsnorm_scales(x + r * x_stride, x_stride, rows - r, n, eps, scales + r);
}

}  // namespace tokamak::cpu::avx512
