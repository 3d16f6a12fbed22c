// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c and only called
// when the CPU has them). Block dot products form each block's integer sum in 8 int32
// lanes (exact), scale them by the block's d and accumulate in 8 float lanes in block order;
// Q4_1's min term goes into a scalar fma chain (a vector lane of its own in the tile forms).
// Scalar arithmetic here is written with explicit fma where it fuses, so that it never
// depends on the compiler's contraction.

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/kquant_dots_avx2.h"
#include "kernels/cpu/packed_matmul_avx2.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu {
namespace {

using namespace avx2;

// One block step of each quantized dot product, shared by the one-row and four-row forms
// so that both compute every row with the same operations in the same order.

// Q4_0: sum((q - 8) * y) = sum(q * y) - 8 * sum(y) per lane (exact integers).
inline void q4_0_step(const block_q4_0& a, __m256i qb, __m256i sum8_b, float db, __m256& acc) {
  const __m256i p = _mm256_sub_epi32(dot_u8_s8(unpack_nibbles(a.qs), qb), sum8_b);
  acc = _mm256_fmadd_ps(_mm256_set1_ps(half(a.d) * db), _mm256_cvtepi32_ps(p), acc);
}
inline __m256i times8_sums(__m256i qb) {
  return dot_u8_s8(_mm256_set1_epi8(8), qb);
}

inline void q4_1_step(const block_q4_1& a, __m256i qb, float db, float sb, __m256& acc,
                      float& mins) {
  const __m256i p = dot_u8_s8(unpack_nibbles(a.qs), qb);
  acc = _mm256_fmadd_ps(_mm256_set1_ps(half(a.d) * db), _mm256_cvtepi32_ps(p), acc);
  mins = std::fma(half(a.m), sb, mins);
}

inline void q8_0_step(const block_q8_0& a, __m256i qb, float db, __m256& acc) {
  const __m256i p = dot_s8_s8(load32(a.qs), qb);
  acc = _mm256_fmadd_ps(_mm256_set1_ps(half(a.d) * db), _mm256_cvtepi32_ps(p), acc);
}

template <typename Block>
inline const Block* row_at(const void* w, size_t stride, int r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * stride);
}

float dot_q4_0_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q4_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qb = load32(b[i].qs);
    q4_0_step(a[i], qb, times8_sums(qb), half(b[i].d), acc);
  }
  return hsum(acc);
}

void dot4_q4_0_q8_0(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_0*>(x);
  const block_q4_0* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<block_q4_0>(w, ws, r);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qb = load32(b[i].qs);
    const __m256i s8 = times8_sums(qb);
    const float db = half(b[i].d);
    q4_0_step(a[0][i], qb, s8, db, acc0);
    q4_0_step(a[1][i], qb, s8, db, acc1);
    q4_0_step(a[2][i], qb, s8, db, acc2);
    q4_0_step(a[3][i], qb, s8, db, acc3);
  }
  out[0] = hsum(acc0);
  out[1] = hsum(acc1);
  out[2] = hsum(acc2);
  out[3] = hsum(acc3);
}

float dot_q4_1_q8_1(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q4_1*>(w);
  const auto* b = static_cast<const block_q8_1*>(x);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    q4_1_step(a[i], load32(b[i].qs), half(b[i].d), half(b[i].s), acc, mins);
  }
  return hsum(acc) + mins;
}

void dot4_q4_1_q8_1(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_1*>(x);
  const block_q4_1* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<block_q4_1>(w, ws, r);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  float m0 = 0.0f, m1 = 0.0f, m2 = 0.0f, m3 = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qb = load32(b[i].qs);
    const float db = half(b[i].d);
    const float sb = half(b[i].s);
    q4_1_step(a[0][i], qb, db, sb, acc0, m0);
    q4_1_step(a[1][i], qb, db, sb, acc1, m1);
    q4_1_step(a[2][i], qb, db, sb, acc2, m2);
    q4_1_step(a[3][i], qb, db, sb, acc3, m3);
  }
  out[0] = hsum(acc0) + m0;
  out[1] = hsum(acc1) + m1;
  out[2] = hsum(acc2) + m2;
  out[3] = hsum(acc3) + m3;
}

float dot_q8_0_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q8_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) q8_0_step(a[i], load32(b[i].qs), half(b[i].d), acc);
  return hsum(acc);
}

void dot4_q8_0_q8_0(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_0*>(x);
  const block_q8_0* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<block_q8_0>(w, ws, r);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qb = load32(b[i].qs);
    const float db = half(b[i].d);
    q8_0_step(a[0][i], qb, db, acc0);
    q8_0_step(a[1][i], qb, db, acc1);
    q8_0_step(a[2][i], qb, db, acc2);
    q8_0_step(a[3][i], qb, db, acc3);
  }
  out[0] = hsum(acc0);
  out[1] = hsum(acc1);
  out[2] = hsum(acc2);
  out[3] = hsum(acc3);
}

// Tile forms: four weight rows by R activation rows. Every output element goes through the
// operations of its one-row step above in the same order: the same exact integer lanes, the
// same fma into its own 8 float lanes, the same fma chain for Q4_1's min term. What the tile
// shares is work that does not round: each weight block is decoded once for the R activation
// rows, and the scales d_w * d_x of a block are formed in one vector multiply (lane for lane
// the scalar products) and broadcast from memory.
//
// A policy T gives the block types and the integer part of one step:
//   w_head(a)       the 32 bits [d | m << 16] at the start of a weight block (m = 0 without)
//   x_halves(b)     an activation block's d (and s) as 8 floats: [d s d s ...] with s,
//                   [d d d d ...] without
//   Col col(b)      what an activation block gives every pair (its quants, ...)
//   row(a)          a weight block's quants, decoded once for every pair
//   sums(row, col)  the 8 int32 lanes of the block's integer dot product, as in the step

struct Q4_0Tile {
  using W = block_q4_0;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  struct Col {
    __m256i q, s8;
  };
  static uint32_t w_head(const W& a) { return a.d; }
  static __m256 x_halves(const X& b) {
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(b.d)));
  }
  static Col col(const X& b) {
    const __m256i q = load32(b.qs);
    return {q, times8_sums(q)};
  }
  static __m256i row(const W& a) { return unpack_nibbles(a.qs); }
  static __m256i sums(__m256i qa, const Col& c) {
    return _mm256_sub_epi32(dot_u8_s8(qa, c.q), c.s8);
  }
};

struct Q4_1Tile {
  using W = block_q4_1;
  using X = block_q8_1;
  static constexpr bool kMins = true;
  struct Col {
    __m256i q;
  };
  static uint32_t w_head(const W& a) { return a.d | uint32_t{a.m} << 16; }
  static __m256 x_halves(const X& b) {
    return _mm256_cvtph_ps(_mm_set1_epi32(static_cast<int32_t>(b.d | uint32_t{b.s} << 16)));
  }
  static Col col(const X& b) { return {load32(b.qs)}; }
  static __m256i row(const W& a) { return unpack_nibbles(a.qs); }
  static __m256i sums(__m256i qa, const Col& c) { return dot_u8_s8(qa, c.q); }
};

struct Q8_0Tile {
  using W = block_q8_0;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  struct Col {
    __m256i q;
  };
  static uint32_t w_head(const W& a) { return a.d; }
  static __m256 x_halves(const X& b) {
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<int16_t>(b.d)));
  }
  static Col col(const X& b) { return {load32(b.qs)}; }
  static __m256i row(const W& a) { return load32(a.qs); }
  static __m256i sums(__m256i qa, const Col& c) { return dot_s8_s8(qa, c.q); }
};

// The accumulators of one activation row of a tile, one per weight row. One object per
// activation row, each used by name, and the loops over weight rows unrolled: GCC then keeps
// the accumulators in registers as far as they fit. With one array for the tile, or a loop
// index into it, it also stores every accumulator to memory on every block.
struct TileRow {
  __m256 acc[4];
};

// acc += scale * sums, as in the steps above.
template <typename T>
inline void tile_step(__m256& acc, const float* scale, __m256i qa, const typename T::Col& col) {
  acc = _mm256_fmadd_ps(_mm256_broadcast_ss(scale), _mm256_cvtepi32_ps(T::sums(qa, col)), acc);
}

// Row c of a tile: hsum(acc) (+ the min chain), into out[0..3]. `mins` holds row c's chains
// in lanes min_lane(r) (see dot4xr).
template <typename T>
inline void tile_finish(const TileRow& t, const float* mins, bool alone, int c, float* out) {
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    if constexpr (T::kMins) {
      const int lane = alone ? 2 * r + 1 : r / 2 * 4 + c % 2 * 2 + r % 2;
      out[r] = hsum(t.acc[r]) + mins[lane];
    } else {
      out[r] = hsum(t.acc[r]);
    }
  }
}

template <typename T, int R>
void dot4xr(int64_t n, const void* w, size_t ws, const void* x, size_t xs, float* out,
            int64_t out_stride) {
  static_assert(R >= 1 && R <= 4);
  assert(n % kQK == 0);
  using W = typename T::W;
  using X = typename T::X;
  const W* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<W>(w, ws, r);
  const X* b[R];
  for (int c = 0; c < R; ++c) b[c] = row_at<X>(x, xs, c);
  TileRow t0{}, t1{}, t2{}, t3{};
  // Q4_1's min chains, activation rows c and c + 1 (c even) in one register, in lanes
  // [r0:c r1:c r0:c+1 r1:c+1 | r2:c r3:c r2:c+1 r3:c+1]; an odd last row alone in lanes 2r + 1.
  __m256 mins01 = _mm256_setzero_ps(), mins23 = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    // [d0 m0 d1 m1 d2 m2 d3 m3] of the four weight blocks (m = 0 without a min).
    const __m256 wh = _mm256_cvtph_ps(_mm_setr_epi32(T::w_head(a[0][i]), T::w_head(a[1][i]),
                                                     T::w_head(a[2][i]), T::w_head(a[3][i])));
    alignas(32) float scale[R][8];  // d_r * d_x of activation row c in scale[c][2r]
    __m256 xh[R];
    typename T::Col col[R];
    for (int c = 0; c < R; ++c) {
      xh[c] = T::x_halves(b[c][i]);
      _mm256_store_ps(scale[c], _mm256_mul_ps(wh, xh[c]));
      col[c] = T::col(b[c][i]);
    }
    if constexpr (T::kMins) {
      // mins = fma(m_r, s_x, mins), as in q4_1_step.
      const __m256 wm = _mm256_shuffle_ps(wh, wh, 0xdd);  // [m0 m1 m0 m1 | m2 m3 m2 m3]
      if constexpr (R == 1) mins01 = _mm256_fmadd_ps(wh, xh[0], mins01);
      if constexpr (R >= 2) {
        mins01 = _mm256_fmadd_ps(wm, _mm256_shuffle_ps(xh[0], xh[1], 0x55), mins01);
      }
      if constexpr (R == 3) mins23 = _mm256_fmadd_ps(wh, xh[2], mins23);
      if constexpr (R == 4) {
        mins23 = _mm256_fmadd_ps(wm, _mm256_shuffle_ps(xh[2], xh[3], 0x55), mins23);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m256i qa = T::row(a[r][i]);
      tile_step<T>(t0.acc[r], &scale[0][2 * r], qa, col[0]);
      if constexpr (R > 1) tile_step<T>(t1.acc[r], &scale[1][2 * r], qa, col[1]);
      if constexpr (R > 2) tile_step<T>(t2.acc[r], &scale[2][2 * r], qa, col[2]);
      if constexpr (R > 3) tile_step<T>(t3.acc[r], &scale[3][2 * r], qa, col[3]);
    }
  }
  alignas(32) float m01[8], m23[8];
  _mm256_store_ps(m01, mins01);
  _mm256_store_ps(m23, mins23);
  tile_finish<T>(t0, m01, R == 1, 0, out);
  if constexpr (R > 1) tile_finish<T>(t1, m01, false, 1, out + out_stride);
  if constexpr (R > 2) tile_finish<T>(t2, m23, R == 3, 2, out + 2 * out_stride);
  if constexpr (R > 3) tile_finish<T>(t3, m23, false, 3, out + 3 * out_stride);
}

// The float dot product shared by F16, BF16 and F32 operands: two 8-lane accumulators over
// 16 elements a step, one more 8-lane step, then a scalar tail. `load` widens 8 elements to
// f32 lanes and `widen` one element; the order is the same for every operand type.
template <typename T, typename Load, typename Widen>
float dot_float_lanes(int64_t n, const void* w, const void* x, Load load, Widen widen) {
  const auto* a = static_cast<const T*>(w);
  const auto* b = static_cast<const T*>(x);
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load(a + i), load(b + i), acc0);
    acc1 = _mm256_fmadd_ps(load(a + i + 8), load(b + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(load(a + i), load(b + i), acc0);
    i += 8;
  }
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum = std::fma(widen(a[i]), widen(b[i]), sum);
  return sum;
}

float dot_f16_f16(int64_t n, const void* w, const void* x) {
  return dot_float_lanes<uint16_t>(
      n, w, x, [](const uint16_t* p) { return load_f16(p); }, [](uint16_t v) { return half(v); });
}

float dot_bf16_bf16(int64_t n, const void* w, const void* x) {
  return dot_float_lanes<uint16_t>(
      n, w, x, [](const uint16_t* p) { return load_bf16(p); },
      [](uint16_t v) { return bf16_to_f32(v); });
}

float dot_f32_f32(int64_t n, const void* w, const void* x) {
  return dot_float_lanes<float>(
      n, w, x, [](const float* p) { return _mm256_loadu_ps(p); }, [](float v) { return v; });
}

// One block of the activation encoding (see quantize.h): returns d, writes 32 int8 and the
// sum of the 32 quants.
inline float quantize_block(const float* x, int8_t* q, int* sum) {
  __m256 v0 = _mm256_loadu_ps(x);
  __m256 v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16);
  __m256 v3 = _mm256_loadu_ps(x + 24);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
  m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v2));
  m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v3));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.0f;
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), kRound));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), kRound));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), kRound));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), kRound));
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
  *sum = _mm_cvtsi128_si32(s4);
  // Pack 4 x 8 int32 into 32 int8; the packs work per 128-bit lane, the permute restores
  // element order.
  const __m256i p16a = _mm256_packs_epi32(i0, i1);
  const __m256i p16b = _mm256_packs_epi32(i2, i3);
  const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
  const __m256i ordered =
      _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
  return d;
}

void to_q8_0(const float* x, void* y, int64_t n) {
  assert(n % kQK == 0);
  auto* out = static_cast<block_q8_0*>(y);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    out[i].d = static_cast<uint16_t>(_cvtss_sh(quantize_block(x + i * kQK, out[i].qs, &sum), 0));
  }
}

void to_q8_1(const float* x, void* y, int64_t n) {
  assert(n % kQK == 0);
  auto* out = static_cast<block_q8_1*>(y);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    const float d = quantize_block(x + i * kQK, out[i].qs, &sum);
    out[i].d = static_cast<uint16_t>(_cvtss_sh(d, 0));
    out[i].s = static_cast<uint16_t>(_cvtss_sh(d * static_cast<float>(sum), 0));
  }
}

void to_f16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<uint16_t*>(y);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = f32_to_fp16(x[i]);
}

void to_bf16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

}  // namespace

const KernelTable& avx2_kernel_table() {
  static const KernelTable table = {
      .isa = Isa::Avx2,
      .to_q8_0 = to_q8_0,
      .to_q8_1 = to_q8_1,
      .to_f16 = to_f16,
      .to_bf16 = to_bf16,
      .to_q8_K = avx2::quantize_row_q8_K_act,
      .q4_0 = {dot_q4_0_q8_0, dot4_q4_0_q8_0, dot4xr<Q4_0Tile, kTileActRows>},
      .q4_1 = {dot_q4_1_q8_1, dot4_q4_1_q8_1, dot4xr<Q4_1Tile, kTileActRows>},
      .q8_0 = {dot_q8_0_q8_0, dot4_q8_0_q8_0, dot4xr<Q8_0Tile, kTileActRows>},
      .f16 = dot_by_rows<dot_f16_f16>(),
      .bf16 = dot_by_rows<dot_bf16_bf16>(),
      .f32 = dot_by_rows<dot_f32_f32>(),
      .q5_0 = {avx2::dot_q5_0_q8_0, avx2::dot4_q5_0_q8_0, dot4xr_by_rows<avx2::dot4_q5_0_q8_0>},
      .q5_1 = dot_by_rows<avx2::dot_q5_1_q8_1>(),
      .q4_k = {avx2::dot_q4_K_q8_K, avx2::dot4_q4_K_q8_K, dot4xr_by_rows<avx2::dot4_q4_K_q8_K>},
      .q5_k = {avx2::dot_q5_K_q8_K, avx2::dot4_q5_K_q8_K, dot4xr_by_rows<avx2::dot4_q5_K_q8_K>},
      .q6_k = {avx2::dot_q6_K_q8_K, avx2::dot4_q6_K_q8_K, dot4xr_by_rows<avx2::dot4_q6_K_q8_K>},
      .silu_mul = avx2::silu_mul,
      .rope_apply = avx2::rope_apply,
      .attention = avx2::attention,
      .paged_attention_span = avx2::paged_attention_span,
      .paged_attention_queries = avx2::paged_attention_queries,
      .q4_0x8 = avx2::packed_matmul_q4_0,
      .q4_1x8 = avx2::packed_matmul_q4_1,
      .q8_0x8 = avx2::packed_matmul_q8_0,
      .q6_kx8 = avx2::packed_matmul_q6_k,
  };
  return table;
}

}  // namespace tokamak::cpu
