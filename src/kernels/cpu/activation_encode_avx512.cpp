// The Q8_0 / Q8_1 activation encoders on AVX-512, sixteen 32-element blocks a pass. AVX2's
// encoder reduces each block's absolute maximum and its quants' sum horizontally, a chain of
// shuffles a block, and converts each block's d (and s) to F16 on its own; here the sixteen
// blocks' 16-lane partials are reduced together by a transposing tree (lane i of the result is
// block i's), so both divisions, the F16 conversions and the tree are paid once for sixteen
// blocks. Max and integer sums are exact, and every other step is AVX2's (the same multiply,
// round-half-to-even, signed saturation and F16 rounding), so the bytes are too. A matmul's
// input is encoded once per call, on one thread below ~32K elements: at a concurrency-32
// decode step of the default model (32 x 576) AVX2's encoder took ~7 us of a 28-68 us call,
// this one ~3 us; a 512-token prefill's matmuls took 4-6% less time with it (Intel AMX guest).

#include "kernels/cpu/activation_encode_avx512.h"

#include <algorithm>
#include <cassert>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu::avx512 {
namespace {

constexpr int kBlocksPerPass = 16;  // a lane each in the reductions

// Lane i of the result: op over the 16 lanes of v[i]. Pairs of neighbouring lanes, then of
// quarters, are combined as they are moved together (the hsum_8x8 pattern, one level more);
// op is exact here (max, wrapping integer add), so the tree's shape does not show.
template <typename Op>
inline __m512 reduce_16x16(const __m512* v, Op op) {
  const auto lanes = [&](__m512 a, __m512 b) {
    return op(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
  };
  const auto quarters = [&](__m512 a, __m512 b) {
    return op(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
  };
  __m512 pairs[8];
  for (int i = 0; i < 8; ++i) pairs[i] = lanes(v[2 * i], v[2 * i + 1]);
  // Each quarter of fours[i] holds blocks 4i..4i+3's partials over that quarter's lanes.
  __m512 fours[4];
  for (int i = 0; i < 4; ++i) fours[i] = lanes(pairs[2 * i], pairs[2 * i + 1]);
  const __m512 halves0 = quarters(fours[0], fours[1]);
  const __m512 halves1 = quarters(fours[2], fours[3]);
  return quarters(halves0, halves1);
}

inline __m512 max_ps(__m512 a, __m512 b) {
  return _mm512_max_ps(a, b);
}

inline __m512 add_epi32(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

template <typename Block>
void encode(const float* x, Block* out, int64_t n) {
  assert(n % kQK == 0);
  constexpr bool kSum = sizeof(Block) == sizeof(block_q8_1);
  const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const int64_t nb = n / kQK;
  for (int64_t b0 = 0; b0 < nb; b0 += kBlocksPerPass) {
    const int count = static_cast<int>(std::min<int64_t>(kBlocksPerPass, nb - b0));
    const float* xb = x + b0 * kQK;
    __m512 amax[kBlocksPerPass];
    for (int j = 0; j < kBlocksPerPass; ++j) {
      amax[j] = j < count
                    ? _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(xb + j * kQK), magnitude),
                                    _mm512_and_ps(_mm512_loadu_ps(xb + j * kQK + 16), magnitude))
                    : _mm512_setzero_ps();
    }
    const __m512 m = reduce_16x16(amax, max_ps);
    const __m512 d = _mm512_div_ps(m, _mm512_set1_ps(127.0f));
    // 127 / amax, 0 for an all-zero block. NaN inputs (a broken model) are not held to the
    // scalar encoder's bytes: its max skips a NaN, vmaxps may not.
    const __mmask16 nonzero = _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __m512 id = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(127.0f), m);

    __m512 sums[kBlocksPerPass];
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    for (int j = 0; j < kBlocksPerPass; ++j) {
      if (j >= count) {
        sums[j] = _mm512_setzero_ps();
        continue;
      }
      const __m512 idj = _mm512_permutexvar_ps(_mm512_set1_epi32(j), id);
      const __m512i q0 =
          _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + j * kQK), idj), kRound);
      const __m512i q1 =
          _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + j * kQK + 16), idj), kRound);
      int8_t* qs = out[b0 + j].qs;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
      // AVX2 sums the quants before saturating them; so does this.
      sums[j] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
    }
    alignas(32) uint16_t dh[kBlocksPerPass];
    alignas(32) uint16_t sh[kBlocksPerPass];
    _mm256_store_si256(reinterpret_cast<__m256i*>(dh),
                       _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
    if constexpr (kSum) {
      const __m512i sum = _mm512_castps_si512(reduce_16x16(sums, add_epi32));
      const __m512 s = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum));
      _mm256_store_si256(reinterpret_cast<__m256i*>(sh),
                         _mm512_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
    }
    for (int j = 0; j < count; ++j) {
      out[b0 + j].d = dh[j];
      if constexpr (kSum) out[b0 + j].s = sh[j];
    }
  }
}

}  // namespace

void to_q8_0(const float* x, void* y, int64_t n) {
  encode(x, static_cast<block_q8_0*>(y), n);
}

void to_q8_1(const float* x, void* y, int64_t n) {
  encode(x, static_cast<block_q8_1*>(y), n);
}

}  // namespace tokamak::cpu::avx512
