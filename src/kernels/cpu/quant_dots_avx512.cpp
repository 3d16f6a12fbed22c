// Quantized dot products with AVX-512 VNNI: dot, dot4 and dot4xr for Q4_0, Q4_1 and Q8_0
// weights (this file is compiled with the AVX-512 flags and only called when the CPU has them).
// Every output is bitwise the AVX2 table's (kernels_avx2.cpp), so batch invariance holds
// whichever level runs and the golden tests against llama.cpp's AVX2 build pass on both:
//
//   integer part  per block and (weight row r, activation row c): 8 int32 lanes, lane k the sum
//                 of the products of elements 4k..4k+3. Exact integers, so any exact sequence
//                 gives AVX2's lanes: here one vpdpbusd (u8 x s8, four products summed, no
//                 saturation) where AVX2 needs maddubs + madd.
//   float part    AVX2's, in its order: acc(r,c) = fma(broadcast(d_r * d_c), float(lanes),
//                 acc(r,c)) block after block in 8 float lanes, then AVX2's horizontal sum; Q4_1
//                 then adds its min chain mins(r,c) = fma(m_r, s_c, mins(r,c)), block after block.
//
// vpdpbusd takes unsigned weights; how each type gets them, exactly:
//   Q4_1  the quants 0..15 as they are.
//   Q4_0  (q - 8) * y = q * y - 8 * y: the lanes start at -8 * (sum of 4 y), computed once per
//         activation block for all weight rows.
//   Q8_0  a * y = (a + 128) * y - 128 * y, a + 128 being a ^ 0x80 read as u8; the lanes start
//         at -128 * (sum of 4 y). |lane| <= 4 * 255 * 128 + 4 * 128 * 128 < 2^31. AVX2's
//         |a| * sign(y, a) is a * y too except for y = -128 with a < 0, which the activation
//         encoding never writes (its quants are in [-127, 127]); weights may hold -128.
//
// Shape (measured on Zen 4): 512-bit registers holding two (r, c) accumulators would halve the
// instructions, but Zen 4 runs a 512-bit op at half the rate of a 256-bit one, so they gain
// nothing there; the 32 ymm registers instead hold a 4 x 4 tile's 16 accumulators without
// spills. Per block each (r, c) costs vpdpbusd + cvtdq2ps + fma, the fma reading its scale as
// a broadcast memory operand. The scales (and Q4_1's min chains) of a run of up to kChunk
// blocks are formed first into a stack array: an fma reading a scale stored in the same block
// waits on store forwarding. On Zen 4 a tile then takes about 1.8 cycles per (r, c) and block
// (AVX2's tile 2.6), and dot4 2.9 per row and block (AVX2's 4.5).

#include "kernels/cpu/quant_dots_avx512.h"

#include <algorithm>
#include <cassert>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu::avx512 {
namespace {

// Helpers of this file only (an inline function compiled here may carry AVX-512 encodings; with
// external linkage it could be handed to the AVX2 path: see kernels_avx512.cpp).

// AVX2's hsum (simd_avx2.h), the same additions in the same order.
inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 16 bytes of nibbles -> 32 bytes 0..15 in GGML's order (low nibbles, then high nibbles).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i bytes =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi64(bytes, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

// Lane indices that rotate 8 lanes down by 2k (lane j takes lane (j + 2k) % 8).
inline __m256i rotation(int k) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_add_epi32(lanes, _mm256_set1_epi32(2 * k)), _mm256_set1_epi32(7));
}

template <typename Block>
inline const Block* row_at(const void* p, size_t stride, int r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(p) + r * stride);
}

// A policy per weight type:
//   W, X            weight and activation blocks
//   kMins           Q4_1's min term
//   kBias           the lanes start at -kBias * (sum of 4 activation quants); 0: at 0
//   w_head, x_head  the 32 bits at the start of a block, d | m << 16 (| s << 16), 0 above d
//                   without; as halves they convert to [d m] (or [d s]) floats
//   quants(a)       the weight block's 32 quants as vpdpbusd's unsigned operand
struct Q4_0Dots {
  using W = block_q4_0;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr int kBias = 8;
  static uint32_t w_head(const W& a) { return a.d; }
  static uint32_t x_head(const X& b) { return b.d; }
  static __m256i quants(const W& a) { return unpack_nibbles(a.qs); }
};

struct Q4_1Dots {
  using W = block_q4_1;
  using X = block_q8_1;
  static constexpr bool kMins = true;
  static constexpr int kBias = 0;
  static uint32_t w_head(const W& a) { return a.d | uint32_t{a.m} << 16; }
  static uint32_t x_head(const X& b) { return b.d | uint32_t{b.s} << 16; }
  static __m256i quants(const W& a) { return unpack_nibbles(a.qs); }
};

struct Q8_0Dots {
  using W = block_q8_0;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr int kBias = 128;
  static uint32_t w_head(const W& a) { return a.d; }
  static uint32_t x_head(const X& b) { return b.d; }
  static __m256i quants(const W& a) {
    return _mm256_xor_si256(load32(a.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

// Where the lanes of an activation block start (see kBias).
template <typename T>
inline __m256i lanes_start(__m256i y) {
  if constexpr (T::kBias == 0) {
    return _mm256_setzero_si256();
  } else {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(T::kBias));
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, y));
  }
}

// Blocks whose scales are formed ahead of their integer work (kChunk * 32 floats of stack).
constexpr int kChunk = 32;

// Four weight rows (ws bytes apart) by R = 1 or 4 activation rows (xs bytes apart): out[c *
// out_stride + r]. The scales of a block are R vectors of 8 floats: vector k holds d_r * d_c
// in lane 2r for c = (r + k) % R (the activation heads rotated by k); its lane 2r + 1 holds
// m_r * s_c, and the same rotation feeds the min chains, R vectors whose lane 2r + 1 is the
// chain of that (r, c) (the even lanes there are unused).
template <typename T, int R>
void rows4(int64_t n, const void* w, size_t ws, const void* x, size_t xs, float* out,
           int64_t out_stride) {
  static_assert(R == 1 || R == 4);
  assert(n % kQK == 0);
  using W = typename T::W;
  using X = typename T::X;
  const W* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<W>(w, ws, r);
  const X* b[R];
  for (int c = 0; c < R; ++c) b[c] = row_at<X>(x, xs, c);
  const auto slot = [](int r, int c) { return 8 * ((c - r) & (R - 1)) + 2 * r; };

  __m256 acc[4][R];  // (r, c); the loops over r and c are unrolled, so these stay in registers
  __m256 mins[R];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < R; ++c) acc[r][c] = _mm256_setzero_ps();
  }
#pragma GCC unroll 4
  for (int k = 0; k < R; ++k) mins[k] = _mm256_setzero_ps();

  alignas(32) float scales[kChunk][8 * R];
  const int64_t nb = n / kQK;
  for (int64_t i0 = 0; i0 < nb; i0 += kChunk) {
    const int64_t i1 = std::min<int64_t>(nb, i0 + kChunk);
    for (int64_t i = i0; i < i1; ++i) {
      // [d0 m0 d1 m1 d2 m2 d3 m3] and [d s] of each activation row (R = 1: four times).
      const __m256 wh = _mm256_cvtph_ps(_mm_setr_epi32(T::w_head(a[0][i]), T::w_head(a[1][i]),
                                                       T::w_head(a[2][i]), T::w_head(a[3][i])));
      __m256 xh;
      if constexpr (R == 1) {
        xh = _mm256_cvtph_ps(_mm_set1_epi32(static_cast<int>(T::x_head(b[0][i]))));
      } else {
        xh = _mm256_cvtph_ps(_mm_setr_epi32(T::x_head(b[0][i]), T::x_head(b[1][i]),
                                            T::x_head(b[2][i]), T::x_head(b[3][i])));
      }
#pragma GCC unroll 4
      for (int k = 0; k < R; ++k) {
        const __m256 xk = k == 0 ? xh : _mm256_permutexvar_ps(rotation(k), xh);
        _mm256_store_ps(scales[i - i0] + 8 * k, _mm256_mul_ps(wh, xk));
        if constexpr (T::kMins) mins[k] = _mm256_fmadd_ps(wh, xk, mins[k]);
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      const float* scale = scales[i - i0];
      __m256i y[R], start[R];
#pragma GCC unroll 4
      for (int c = 0; c < R; ++c) {
        y[c] = load32(b[c][i].qs);
        start[c] = lanes_start<T>(y[c]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m256i q = T::quants(a[r][i]);
#pragma GCC unroll 4
        for (int c = 0; c < R; ++c) {
          const __m256i p = _mm256_dpbusd_epi32(start[c], q, y[c]);
          acc[r][c] = _mm256_fmadd_ps(_mm256_broadcast_ss(scale + slot(r, c)),
                                      _mm256_cvtepi32_ps(p), acc[r][c]);
        }
      }
    }
  }

  alignas(32) float m[8 * R];
#pragma GCC unroll 4
  for (int k = 0; k < R; ++k) _mm256_store_ps(m + 8 * k, mins[k]);
#pragma GCC unroll 4
  for (int c = 0; c < R; ++c) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const float sum = hsum256(acc[r][c]);
      out[c * out_stride + r] = T::kMins ? sum + m[slot(r, c) + 1] : sum;
    }
  }
}

template <typename T>
void dot4(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  rows4<T, 1>(n, w, ws, x, 0, out, 0);
}

template <typename T>
void dot4xr(int64_t n, const void* w, size_t ws, const void* x, size_t xs, float* out,
            int64_t out_stride) {
  static_assert(kTileActRows == 4, "rows4 forms tiles of four activation rows");
  rows4<T, kTileActRows>(n, w, ws, x, xs, out, out_stride);
}

// One weight row: too little work per block to pay for a run of scales ahead, so each block
// forms its own, in a register.
template <typename T>
float dot(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const typename T::W*>(w);
  const auto* b = static_cast<const typename T::X*>(x);
  __m256 acc = _mm256_setzero_ps();
  __m128 mins = _mm_setzero_ps();  // the chain in lane 1
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m128 wh = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(T::w_head(a[i]))));
    const __m128 xh = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(T::x_head(b[i]))));
    if constexpr (T::kMins) mins = _mm_fmadd_ps(wh, xh, mins);
    const __m256 scale = _mm256_broadcastss_ps(_mm_mul_ps(wh, xh));
    const __m256i y = load32(b[i].qs);
    const __m256i p = _mm256_dpbusd_epi32(lanes_start<T>(y), T::quants(a[i]), y);
    acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc);
  }
  const float sum = hsum256(acc);
  return T::kMins ? sum + _mm_cvtss_f32(_mm_movehdup_ps(mins)) : sum;
}

template <typename T>
DotKernel dots() {
  return {dot<T>, dot4<T>, dot4xr<T>};
}

}  // namespace

DotKernel q4_0_dots() {
  return dots<Q4_0Dots>();
}
DotKernel q4_1_dots() {
  return dots<Q4_1Dots>();
}
DotKernel q8_0_dots() {
  return dots<Q8_0Dots>();
}

}  // namespace tokamak::cpu::avx512
