// AVX2 + FMA + F16C dot products of Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights against their
// activation encodings, and the Q8_K activation encoder (this file is compiled with -mavx2
// -mfma -mf16c and only called when the CPU has them).
//
// Bitwise equal to the scalar twins (kquant_dots.cpp). SIMD forms each block's (or
// super-block's) exact integer sums, in whatever order suits it, since integers do not round;
// then the twin's float steps run per block, in block order:
//
//   Q5_0   sum += float(sumi) * (dw * dx)
//   Q5_1   sum += float(sumi) * (dw * dx) + mw * sx
//   K      sum += (dx * d) * float(sumi);  sum -= (dx * dmin) * float(summ)   (Q6_K: no summ)
//
// For the 32-element types the terms of 8 blocks are formed at once in vector lanes (a lane's
// multiply or add rounds as the scalar one) and then added to sum one after the other. None of
// these steps may be fused into an fma, as the twin (compiled without -mfma) does not fuse them;
// GCC fuses a * b + c even in ISO C++ mode once the target has FMA, so contraction is turned
// off for the whole file below (before any include, so that every inlined function agrees), and
// the file writes no explicit fma. The halves are widened with F16C, exact as fp16_to_f32 is.
//
// Integer parts: vpmaddubsw takes a weight quant (0..63) as its unsigned operand and the
// activation as the signed one, so a pair of products is at most 2 * 63 * 128 = 16128 in
// magnitude and never saturates, for any int8 activation (-128 included; the sign trick of
// dot_s8_s8 would get -128 wrong). Quants with an offset are multiplied without it and the
// offset's products subtracted: Q5_0's q - 16 as nibble * x - 16 * x where the fifth bit is
// clear; Q6_K's q - 32 as q * x less 32 * sc * bsums (so Q6_K too relies on Q8_K's bsums).
// The int32 lanes cannot overflow: every partial sum stays below 2^28 in magnitude.
//
// The four-row forms share each activation load among four weight rows and run each row
// through the one-row form's operations, so out[r] is bitwise dot(row r).

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels/cpu/kquant_dots_avx2.h"

#include <immintrin.h>

#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu::avx2 {
namespace {

template <typename Block>
inline const Block* row_at(const void* w, size_t stride, int r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * stride);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Asks for the lines of a block kPrefetchBytes ahead of it. A four-row form reads four rows
// side by side, and without this the first load of each block waited on memory (perf: most of a
// decode step's samples of the GGUF-layout K-quant GEMV sat on the block's first use).
constexpr int kPrefetchBytes = 4096;

template <typename Block>
inline void prefetch_ahead(const Block* block) {
  const char* p = reinterpret_cast<const char*>(block) + kPrefetchBytes;
  for (size_t o = 0; o < sizeof(Block); o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

// The sum of the 8 int32 lanes.
inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// [Σ v[0], Σ v[1], ..., Σ v[7]]: the lane sums of 8 vectors in one. In each 128-bit half, pairs
// of vectors are interleaved by 32-bit lanes and added, then pairs of those by 64-bit lanes,
// leaving [Σ v0 Σ v1 Σ v2 Σ v3] of that half's lanes; the halves of the two results are then
// added crosswise. (Unpacks and adds: fewer uops than vphaddd.)
inline __m256i lane_sums8(const __m256i* v) {
  __m256i pair[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    pair[k] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                               _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  }
  const __m256i s0123 = _mm256_add_epi32(_mm256_unpacklo_epi64(pair[0], pair[1]),
                                         _mm256_unpackhi_epi64(pair[0], pair[1]));
  const __m256i s4567 = _mm256_add_epi32(_mm256_unpacklo_epi64(pair[2], pair[3]),
                                         _mm256_unpackhi_epi64(pair[2], pair[3]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                          _mm256_permute2x128_si256(s0123, s4567, 0x31));
}

// ---------------------------------------------------------------------------------------------
// Q5_0 and Q5_1: blocks of 32, whose float terms are formed kRun blocks at a time.

constexpr int kRun = 8;

// 0xff in byte j where bit j of a 5-bit block's qh (little-endian) is set, else 0.
inline __m256i fifth_bit_mask(const uint8_t* qh) {
  uint32_t bits = 0;
  std::memcpy(&bits, qh, 4);
  // Byte j takes byte j / 8 of qh (vpshufb picks within each 128-bit half; both hold all four),
  // then tests its bit j % 8.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit_j = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_j), bit_j);
}

// Σ (q - 16) * x of a Q5_0 block in 8 int32 lanes. q - 16 is the low nibble, less 16 where the
// fifth bit is clear: the pairs are nibble * x less 16 * x over those, each within int16.
inline __m256i q5_0_lanes(const block_q5_0& a, __m256i x) {
  const __m256i less16 = _mm256_andnot_si256(fifth_bit_mask(a.qh), _mm256_set1_epi8(16));
  const __m256i pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(unpack_nibbles(a.qs), x),
                                         _mm256_maddubs_epi16(less16, x));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// Σ q * x of a Q5_1 block in 8 int32 lanes, q = nibble | 16 * fifth bit.
inline __m256i q5_1_lanes(const block_q5_1& a, __m256i x) {
  const __m256i high = _mm256_and_si256(fifth_bit_mask(a.qh), _mm256_set1_epi8(16));
  return dot_u8_s8(_mm256_or_si256(unpack_nibbles(a.qs), high), x);
}

// The 8 halves half_of(0..7) as floats.
template <typename HalfOf>
inline __m256 halves8(HalfOf half_of) {
  return _mm256_cvtph_ps(
      _mm_setr_epi16(static_cast<int16_t>(half_of(0)), static_cast<int16_t>(half_of(1)),
                     static_cast<int16_t>(half_of(2)), static_cast<int16_t>(half_of(3)),
                     static_cast<int16_t>(half_of(4)), static_cast<int16_t>(half_of(5)),
                     static_cast<int16_t>(half_of(6)), static_cast<int16_t>(half_of(7))));
}

// sum += terms[0]; sum += terms[1]; ... as the scalar loop adds its blocks.
inline float add_in_order(float sum, __m256 terms) {
  alignas(32) float t[kRun];
  _mm256_store_ps(t, terms);
#pragma GCC unroll 8
  for (int k = 0; k < kRun; ++k) sum += t[k];
  return sum;
}

// The terms float(sumi) * (dw * dx) of blocks a[0..8) against b[0..8), whose activation quants
// are x[0..8).
inline __m256 q5_0_terms(const block_q5_0* a, const block_q8_0* b, const __m256i* x) {
  __m256i lanes[kRun];
#pragma GCC unroll 8
  for (int k = 0; k < kRun; ++k) lanes[k] = q5_0_lanes(a[k], x[k]);
  const __m256 dw = halves8([a](int k) { return a[k].d; });
  const __m256 dx = halves8([b](int k) { return b[k].d; });
  return _mm256_mul_ps(_mm256_cvtepi32_ps(lane_sums8(lanes)), _mm256_mul_ps(dw, dx));
}

// The one-block step, for the blocks after the last whole run.
inline float q5_0_block(float sum, const block_q5_0& a, const block_q8_0& b) {
  const int sumi = hsum_i32(q5_0_lanes(a, load32(b.qs)));
  return sum + static_cast<float>(sumi) * (half(a.d) * half(b.d));
}

// The terms float(sumi) * (dw * dx) + mw * sx of blocks a[0..8) against b[0..8).
inline __m256 q5_1_terms(const block_q5_1* a, const block_q8_1* b) {
  __m256i lanes[kRun];
#pragma GCC unroll 8
  for (int k = 0; k < kRun; ++k) lanes[k] = q5_1_lanes(a[k], load32(b[k].qs));
  const __m256 dw = halves8([a](int k) { return a[k].d; });
  const __m256 dx = halves8([b](int k) { return b[k].d; });
  const __m256 mw = halves8([a](int k) { return a[k].m; });
  const __m256 sx = halves8([b](int k) { return b[k].s; });
  return _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(lane_sums8(lanes)), _mm256_mul_ps(dw, dx)),
                       _mm256_mul_ps(mw, sx));
}

inline float q5_1_block(float sum, const block_q5_1& a, const block_q8_1& b) {
  const int sumi = hsum_i32(q5_1_lanes(a, load32(b.qs)));
  return sum + (static_cast<float>(sumi) * (half(a.d) * half(b.d)) + half(a.m) * half(b.s));
}

// ---------------------------------------------------------------------------------------------
// Q4_K and Q5_K: super-blocks of 8 sub-blocks of 32 with 6-bit scales and mins.

template <typename Block>
inline constexpr bool kHasFifthBit = std::is_same_v<Block, block_q5_K>;

// A super-block's scales and mins (kq_scale_min), as the sums below use them.
struct KScalesMins {
  __m256i scales;  // sc[0..7] as int16, in both 128-bit halves (for vpshufb)
  __m256i mins;    // [m0 m0 m1 m1 ... m7 m7] as int16: m[s] against bsums 2s and 2s + 1
};

inline KScalesMins unpack_scales_mins(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, kKScaleBytes);
  constexpr uint32_t kLow6 = 0x3f3f3f3f;
  constexpr uint32_t kLow4 = 0x0f0f0f0f;
  constexpr uint32_t kLow2 = 0x03030303;
  // Byte s of each word is sub-block s (or s + 4) of kq_scale_min: the first four in the low
  // 6 bits of bytes s and s + 4; the last four in the nibbles of bytes 8..11 with their top
  // two bits from the top bits of bytes 0..3 (scales) and 4..7 (mins).
  const uint32_t sc_0123 = w[0] & kLow6;
  const uint32_t m_0123 = w[1] & kLow6;
  const uint32_t sc_4567 = (w[2] & kLow4) | ((w[0] >> 6) & kLow2) << 4;
  const uint32_t m_4567 = ((w[2] >> 4) & kLow4) | ((w[1] >> 6) & kLow2) << 4;
  const __m128i bytes = _mm_setr_epi32(static_cast<int>(sc_0123), static_cast<int>(sc_4567),
                                       static_cast<int>(m_0123), static_cast<int>(m_4567));
  return {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes)),
          _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(bytes, bytes))};
}

// sc[s] in all 16 int16 lanes.
inline __m256i scale_of(__m256i scales, int s) {
  return _mm256_shuffle_epi8(scales,
                             _mm256_set1_epi16(static_cast<int16_t>((2 * s + 1) << 8 | 2 * s)));
}

// Q5_K's fifth bits of sub-block s: bit s of each byte of qh, moved to 0x10. A 16-bit shift
// brings bit 4 of each byte from bit s of the same byte (s <= 7), so nothing crosses bytes.
inline __m256i k_fifth_bits(__m256i qh, int s) {
  const __m256i moved = s < 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
  return _mm256_and_si256(moved, _mm256_set1_epi8(0x10));
}

// acc + sc[s] * q * x over sub-blocks s = 2c and 2c + 1 (the low and the high nibbles of
// qs[32c, 32c + 32), plus their fifth bits from qh for Q5_K), against x_lo and x_hi.
template <typename Block>
inline __m256i q45_K_pair(const Block& a, __m256i scales, __m256i qh, int c, __m256i x_lo,
                          __m256i x_hi, __m256i acc) {
  const __m256i nibbles = load256(a.qs + 32 * c);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256i q_lo = _mm256_and_si256(nibbles, low4);
  __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), low4);
  if constexpr (kHasFifthBit<Block>) {
    q_lo = _mm256_or_si256(q_lo, k_fifth_bits(qh, 2 * c));
    q_hi = _mm256_or_si256(q_hi, k_fifth_bits(qh, 2 * c + 1));
  }
  const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q_lo, x_lo), scale_of(scales, 2 * c));
  const __m256i p_hi =
      _mm256_madd_epi16(_mm256_maddubs_epi16(q_hi, x_hi), scale_of(scales, 2 * c + 1));
  return _mm256_add_epi32(acc, _mm256_add_epi32(p_lo, p_hi));
}

template <typename Block>
inline __m256i fifth_bit_bytes(const Block& a) {
  if constexpr (kHasFifthBit<Block>) {
    return load256(a.qh);
  } else {
    return _mm256_setzero_si256();
  }
}

// The twin's float steps of one K-quant super-block.
inline float k_step(float sum, float dx, uint16_t d, uint16_t dmin, int sumi, int summ) {
  sum += (dx * half(d)) * static_cast<float>(sumi);
  sum -= (dx * half(dmin)) * static_cast<float>(summ);
  return sum;
}

template <typename Block>
float dot_q45_K(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const Block*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const KScalesMins sm = unpack_scales_mins(a[i].scales);
    const __m256i qh = fifth_bit_bytes(a[i]);
    __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      acc = q45_K_pair(a[i], sm.scales, qh, c, load32(b[i].qs + 64 * c),
                       load32(b[i].qs + 64 * c + 32), acc);
    }
    // summ: m[s] * (bsums[2s] + bsums[2s + 1]), at most 63 * 2 * 2048 a lane.
    const int summ = hsum_i32(_mm256_madd_epi16(load256(b[i].bsums), sm.mins));
    sum = k_step(sum, b[i].d, a[i].d, a[i].dmin, hsum_i32(acc), summ);
  }
  return sum;
}

template <typename Block>
void dot4_q45_K(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const block_q8_K*>(x);
  const Block* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<Block>(w, ws, r);
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    KScalesMins sm[4];
    __m256i qh[4];
    __m256i acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      prefetch_ahead(&a[r][i]);
      sm[r] = unpack_scales_mins(a[r][i].scales);
      qh[r] = fifth_bit_bytes(a[r][i]);
      acc[r] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i x_lo = load32(b[i].qs + 64 * c);
      const __m256i x_hi = load32(b[i].qs + 64 * c + 32);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        acc[r] = q45_K_pair(a[r][i], sm[r].scales, qh[r], c, x_lo, x_hi, acc[r]);
      }
    }
    const __m256i bsums = load256(b[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const int summ = hsum_i32(_mm256_madd_epi16(bsums, sm[r].mins));
      sum[r] = k_step(sum[r], b[i].d, a[r][i].d, a[r][i].dmin, hsum_i32(acc[r]), summ);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = sum[r];
}

// ---------------------------------------------------------------------------------------------
// Q6_K: super-blocks of 16 sub-blocks of 16 with int8 scales, in two halves of four groups of
// 32 elements (quant_blocks.h).

// The scales of group g of a half: sc[2g] in int16 lanes 0..7 (the group's first 16 elements),
// sc[2g + 1] in lanes 8..15; from the half's 8 scales as int16 in both 128-bit halves.
inline __m256i q6_group_scales(__m256i half_scales, int g) {
  return _mm256_shuffle_epi8(
      half_scales,
      _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * g + 1) << 8 | 4 * g)),
                        _mm_set1_epi16(static_cast<int16_t>((4 * g + 3) << 8 | (4 * g + 2)))));
}

// acc + sc * q * x over group g (elements 128h + 32g .. + 32) of half h, q the quant 0..63.
inline __m256i q6_K_group(const block_q6_K& a, __m256i half_scales, int h, int g, __m256i x,
                          __m256i acc) {
  const __m256i low_bytes = load256(a.ql + 64 * h + 32 * (g & 1));
  const __m256i low =
      _mm256_and_si256(g < 2 ? low_bytes : _mm256_srli_epi16(low_bytes, 4), _mm256_set1_epi8(0x0f));
  // Bits 2g and 2g + 1 of each qh byte to bits 4 and 5; as in k_fifth_bits no bit crosses bytes.
  const __m256i high_bytes = load256(a.qh + 32 * h);
  const __m256i moved =
      g < 2 ? _mm256_slli_epi16(high_bytes, 4 - 2 * g) : _mm256_srli_epi16(high_bytes, 2 * g - 4);
  const __m256i q = _mm256_or_si256(low, _mm256_and_si256(moved, _mm256_set1_epi8(0x30)));
  return _mm256_add_epi32(
      acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), q6_group_scales(half_scales, g)));
}

// The 16 scales as int16.
inline __m256i q6_scales(const block_q6_K& a) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.scales)));
}

// The 8 scales of half h as int16, in both 128-bit halves.
inline __m256i q6_half_scales(__m256i scales, int h) {
  return h == 0 ? _mm256_permute2x128_si256(scales, scales, 0x00)
                : _mm256_permute2x128_si256(scales, scales, 0x11);
}

// Σ sc[s] * 32 * bsums[s] in 8 int32 lanes: the offset q - 32 takes from Σ sc * q * x.
inline __m256i q6_offset(__m256i scales, __m256i bsums) {
  return _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales), 5);
}

inline int q6_K_sumi(const block_q6_K& a, const block_q8_K& b) {
  const __m256i scales = q6_scales(a);
  __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i half_scales = q6_half_scales(scales, h);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      acc = q6_K_group(a, half_scales, h, g, load32(b.qs + 128 * h + 32 * g), acc);
    }
  }
  return hsum_i32(_mm256_sub_epi32(acc, q6_offset(scales, load256(b.bsums))));
}

}  // namespace

float dot_q5_0_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q5_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  const int64_t nb = n / kQK;
  float sum = 0.0f;
  int64_t i = 0;
  for (; i + kRun <= nb; i += kRun) {
    __m256i xq[kRun];
#pragma GCC unroll 8
    for (int k = 0; k < kRun; ++k) xq[k] = load32(b[i + k].qs);
    sum = add_in_order(sum, q5_0_terms(a + i, b + i, xq));
  }
  for (; i < nb; ++i) sum = q5_0_block(sum, a[i], b[i]);
  return sum;
}

void dot4_q5_0_q8_0(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_0*>(x);
  const block_q5_0* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<block_q5_0>(w, ws, r);
  const int64_t nb = n / kQK;
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + kRun <= nb; i += kRun) {
    __m256i xq[kRun];
#pragma GCC unroll 8
    for (int k = 0; k < kRun; ++k) xq[k] = load32(b[i + k].qs);
    for (int r = 0; r < 4; ++r) {
      sum[r] = add_in_order(sum[r], q5_0_terms(a[r] + i, b + i, xq));
    }
  }
  for (; i < nb; ++i) {
    for (int r = 0; r < 4; ++r) sum[r] = q5_0_block(sum[r], a[r][i], b[i]);
  }
  for (int r = 0; r < 4; ++r) out[r] = sum[r];
}

float dot_q5_1_q8_1(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q5_1*>(w);
  const auto* b = static_cast<const block_q8_1*>(x);
  const int64_t nb = n / kQK;
  float sum = 0.0f;
  int64_t i = 0;
  for (; i + kRun <= nb; i += kRun) sum = add_in_order(sum, q5_1_terms(a + i, b + i));
  for (; i < nb; ++i) sum = q5_1_block(sum, a[i], b[i]);
  return sum;
}

float dot_q4_K_q8_K(int64_t n, const void* w, const void* x) {
  return dot_q45_K<block_q4_K>(n, w, x);
}

float dot_q5_K_q8_K(int64_t n, const void* w, const void* x) {
  return dot_q45_K<block_q5_K>(n, w, x);
}

void dot4_q4_K_q8_K(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  dot4_q45_K<block_q4_K>(n, w, ws, x, out);
}

void dot4_q5_K_q8_K(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  dot4_q45_K<block_q5_K>(n, w, ws, x, out);
}

float dot_q6_K_q8_K(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const block_q6_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    sum += (b[i].d * half(a[i].d)) * static_cast<float>(q6_K_sumi(a[i], b[i]));
  }
  return sum;
}

void dot4_q6_K_q8_K(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  assert(n % kQK_K == 0);
  const auto* b = static_cast<const block_q8_K*>(x);
  const block_q6_K* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<block_q6_K>(w, ws, r);
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i scales[4];
    __m256i acc[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      prefetch_ahead(&a[r][i]);
      scales[r] = q6_scales(a[r][i]);
      acc[r] = _mm256_setzero_si256();
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i xq = load32(b[i].qs + 128 * h + 32 * g);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          acc[r] = q6_K_group(a[r][i], q6_half_scales(scales[r], h), h, g, xq, acc[r]);
        }
      }
    }
    const __m256i bsums = load256(b[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const int sumi = hsum_i32(_mm256_sub_epi32(acc[r], q6_offset(scales[r], bsums)));
      sum[r] += (b[i].d * half(a[r][i].d)) * static_cast<float>(sumi);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = sum[r];
}

void quantize_row_q8_K_act(const float* x, void* y, int64_t n) {
  assert(n % kQK_K == 0);
  auto* out = static_cast<block_q8_K*>(y);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* xs = x + i * kQK_K;
    block_q8_K& q = out[i];
    // amax = max |x|, in any order (max is exact). vmaxps returns its second operand when
    // either is NaN, so with the running max second a NaN is skipped, as std::max(amax, |x|)
    // skips it.
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8) {
      m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xs + j)), m);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    q.d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    // nearbyint: the current rounding mode, no inexact flag.
    constexpr int kRound = _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC;
    __m256i part_sums[kQK_K / 16];  // int32 lanes summing to bsums[k]
#pragma GCC unroll 8
    for (int k = 0; k < kQK_K / 32; ++k) {
      __m256i v[4];
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        v[t] = _mm256_cvtps_epi32(
            _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xs + 32 * k + 8 * t), id), kRound));
      }
      // q fits int8 (|x * id| <= 127 up to rounding), so the saturating packs are plain
      // narrowing; they work per 128-bit half, and the permute restores element order.
      const __m256i packed =
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(q.qs + 32 * k),
          _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      part_sums[2 * k] = _mm256_add_epi32(v[0], v[1]);
      part_sums[2 * k + 1] = _mm256_add_epi32(v[2], v[3]);
    }
    // packs interleaves 4-lane groups of its operands per 128-bit half; the permute undoes it.
    const __m256i bsums =
        _mm256_packs_epi32(lane_sums8(part_sums), lane_sums8(part_sums + kQK_K / 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q.bsums), _mm256_permute4x64_epi64(bsums, 0xd8));
  }
}

}  // namespace tokamak::cpu::avx2
