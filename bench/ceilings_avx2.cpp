// The AVX2 ceiling loops (ceilings_kernels.h). Compiled with -mavx2 -mfma; called only on
// CPUs that have both.

#include <immintrin.h>

#include "ceilings_kernels.h"

namespace tokamak::bench::avx2 {
namespace {

// Independent accumulator chains: enough to cover the FMA latency (4 cycles) on two pipes
// (8 in flight) with room to spare, while all of them and the operands fit in the 16 ymm
// registers.
constexpr int kFmaChains = 12;
// Integer chains: the only loop-carried dependency is vpaddd (1 cycle); the products are
// independent of it, so a few chains suffice.
constexpr int kDotChains = 6;

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

int64_t hsum_epi64(__m256i v) {
  alignas(32) int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

double fma_loop(int64_t iters) {
  // acc = acc * 0.999999 + 1e-6 converges to 1: no overflow, no denormals.
  const __m256 mul = _mm256_set1_ps(0.999999f);
  const __m256 add = _mm256_set1_ps(1e-6f);
  __m256 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kFmaChains; ++i) s = _mm256_add_ps(s, acc[i]);
  return hsum(s);
}

double dot_i8_loop(int64_t iters) {
  __m256i a = _mm256_set1_epi8(3);  // unsigned operand
  const __m256i b = _mm256_set1_epi8(-2);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kDotChains];
  for (int i = 0; i < kDotChains; ++i) acc[i] = _mm256_setzero_si256();
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 8
    for (int i = 0; i < kDotChains; ++i) {
      // An empty asm that "changes" a: the products cannot be hoisted out of the loop or
      // shared between the chains.
      asm volatile("" : "+x"(a));
      const __m256i pairs = _mm256_maddubs_epi16(a, b);  // 32 products, summed in pairs
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(pairs, ones));
    }
  }
  __m256i s = acc[0];
  for (int i = 1; i < kDotChains; ++i) s = _mm256_add_epi32(s, acc[i]);
  return static_cast<double>(hsum_epi64(s));
}

}  // namespace

uint64_t read_sum(const void* p, size_t bytes) {
  // Four streams, one per quarter (as in the AVX-512 loop).
  const size_t quarter = bytes / 4 / 256 * 256;
  const auto* s0 = static_cast<const uint8_t*>(p);
  const uint8_t* s1 = s0 + quarter;
  const uint8_t* s2 = s1 + quarter;
  const uint8_t* s3 = s2 + quarter;
  const auto load = [](const uint8_t* q) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
  };
  __m256i a0 = _mm256_setzero_si256();
  __m256i a1 = _mm256_setzero_si256();
  __m256i a2 = _mm256_setzero_si256();
  __m256i a3 = _mm256_setzero_si256();
  for (size_t i = 0; i < quarter; i += 64) {  // 2 x 32 bytes of each stream per step
    a0 = _mm256_add_epi64(a0, load(s0 + i));
    a1 = _mm256_add_epi64(a1, load(s1 + i));
    a2 = _mm256_add_epi64(a2, load(s2 + i));
    a3 = _mm256_add_epi64(a3, load(s3 + i));
    a0 = _mm256_add_epi64(a0, load(s0 + i + 32));
    a1 = _mm256_add_epi64(a1, load(s1 + i + 32));
    a2 = _mm256_add_epi64(a2, load(s2 + i + 32));
    a3 = _mm256_add_epi64(a3, load(s3 + i + 32));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  return static_cast<uint64_t>(hsum_epi64(s));
}

PeakLoop fma_f32() {
  return {fma_loop, kFmaChains * 8 * 2.0};
}
PeakLoop dot_i8() {
  return {dot_i8_loop, kDotChains * 32 * 2.0};
}

}  // namespace tokamak::bench::avx2
