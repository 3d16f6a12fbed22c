// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c and only called
// when the CPU has them). Block dot products form each block's integer sum in 8 int32
// lanes (exact), scale them by the block's d and accumulate in 8 float lanes in block order;
// Q4_1's min term goes into a scalar fma chain. Scalar arithmetic here is written with
// explicit fma where it fuses, so that it never depends on the compiler's contraction.

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_blocks.h"
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
      .q4_0 = {dot_q4_0_q8_0, dot4_q4_0_q8_0},
      .q4_1 = {dot_q4_1_q8_1, dot4_q4_1_q8_1},
      .q8_0 = {dot_q8_0_q8_0, dot4_q8_0_q8_0},
      .f16 = {dot_f16_f16, dot4_by_rows<dot_f16_f16>},
      .bf16 = {dot_bf16_bf16, dot4_by_rows<dot_bf16_bf16>},
      .f32 = {dot_f32_f32, dot4_by_rows<dot_f32_f32>},
      .silu_mul = avx2::silu_mul,
      .attention = avx2::attention,
  };
  return table;
}

}  // namespace tokamak::cpu
