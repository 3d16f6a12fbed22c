// AVX-512 (F/BW/VL/DQ + VNNI, and BF16 where the CPU has it) kernels. This file is compiled
// with those extensions and only called when the CPU has them. Block dot products form the
// integer sums of two blocks at a time with vpdpbusd (exact) and accumulate them in AVX2's
// float order, so quantized models give the same bits as with the AVX2 table (and as
// llama.cpp's AVX2 build). Activation encoders, silu, attention, paged attention and the
// quantized tile forms (dot4xr) are the AVX2 ones. The plain-type dots (F16, BF16, F32) use
// 16-lane accumulators and round differently from AVX2.

// GCC 12 warns inside its own AVX-512 headers (the `__Y = __Y` idiom of _mm512_undefined_*
// used by cvtph_ps, cvtepi32_ps, inserti64x4, ...): a known false positive, silenced for the
// header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cassert>
#include <cmath>

#include "core/fp16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu {
namespace {

// These small helpers repeat some of simd_avx2.h on purpose: an inline function compiled in
// this file may carry AVX-512 encodings, and if it had external linkage under the same name
// as an AVX2 file's copy, the linker could hand the AVX-512 one to the AVX2 path and crash an
// AVX2-only CPU. Keeping them in this file's anonymous namespace rules that out.
inline float half(uint16_t h) {
  return _cvtsh_ss(h);
}

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hsum512(__m512 v) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum256(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}

inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(bytes, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  return _mm256_set_m128i(hi, lo);
}

inline __m256i load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Block steps shared by the one-row and four-row forms (same operations, same order). A pair
// of blocks shares one 512-bit register for the integer sums (vpdpbusd gives each 32-bit lane
// the sum of 4 adjacent products, the very lanes of AVX2's maddubs + madd), then the two halves
// are scaled and accumulated one block after the other into 8 float lanes, exactly as the AVX2
// kernels (and llama.cpp's AVX2 build) do: the results are bitwise those of the AVX2 table.

inline __m512i load_pair(const int8_t* p0, const int8_t* p1) {
  return join(load32(p0), load32(p1));
}

inline __m256 low_half(__m512 v) {
  return _mm512_castps512_ps256(v);
}
inline __m256 high_half(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// acc += d0 * sums(block i) then acc += d1 * sums(block i + 1).
inline void accumulate_pair(__m512i p, float d0, float d1, __m256& acc) {
  const __m512 f = _mm512_cvtepi32_ps(p);
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d0), low_half(f), acc);
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d1), high_half(f), acc);
}
inline void accumulate_single(__m256i p, float d, __m256& acc) {
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc);
}

// Q4_0: sum((q - 8) * y) = sum(q * y) - sum(8 * y), both exact with vpdpbusd.
inline void q4_0_pair(const block_q4_0* a, __m512i qb, __m512i sum8_b, float db0, float db1,
                      __m256& acc) {
  const __m512i qa = join(unpack_nibbles(a[0].qs), unpack_nibbles(a[1].qs));
  const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, qb), sum8_b);
  accumulate_pair(p, half(a[0].d) * db0, half(a[1].d) * db1, acc);
}
inline void q4_0_single(const block_q4_0& a, __m256i qb, __m256i sum8_b, float db, __m256& acc) {
  const __m256i p = _mm256_sub_epi32(
      _mm256_dpbusd_epi32(_mm256_setzero_si256(), unpack_nibbles(a.qs), qb), sum8_b);
  accumulate_single(p, half(a.d) * db, acc);
}

inline void q4_1_pair(const block_q4_1* a, __m512i qb, float db0, float db1, float sb0, float sb1,
                      __m256& acc, float& mins) {
  const __m512i qa = join(unpack_nibbles(a[0].qs), unpack_nibbles(a[1].qs));
  const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, qb);
  accumulate_pair(p, half(a[0].d) * db0, half(a[1].d) * db1, acc);
  mins = std::fma(half(a[0].m), sb0, mins);
  mins = std::fma(half(a[1].m), sb1, mins);
}
inline void q4_1_single(const block_q4_1& a, __m256i qb, float db, float sb, __m256& acc,
                        float& mins) {
  const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), unpack_nibbles(a.qs), qb);
  accumulate_single(p, half(a.d) * db, acc);
  mins = std::fma(half(a.m), sb, mins);
}

// Q8_0: sum(a * b) = sum(|a| * (b negated where a < 0)), unsigned x signed for vpdpbusd.
inline void q8_0_pair(const block_q8_0* a, __m512i qb, float db0, float db1, __m256& acc) {
  const __m512i qa = load_pair(a[0].qs, a[1].qs);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i sb = _mm512_mask_sub_epi8(qb, _mm512_movepi8_mask(qa), zero, qb);
  const __m512i p = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(qa), sb);
  accumulate_pair(p, half(a[0].d) * db0, half(a[1].d) * db1, acc);
}
inline void q8_0_single(const block_q8_0& a, __m256i qb, float db, __m256& acc) {
  const __m256i qa = load32(a.qs);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i sb = _mm256_mask_sub_epi8(qb, _mm256_movepi8_mask(qa), zero, qb);
  const __m256i p = _mm256_dpbusd_epi32(zero, _mm256_abs_epi8(qa), sb);
  accumulate_single(p, half(a.d) * db, acc);
}

template <typename Block>
inline const Block* row_at(const void* w, size_t stride, int r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + r * stride);
}

// The four-row forms run R = 1 or 4 rows through the same steps.
template <int R>
void q4_0_rows(int64_t n, const block_q4_0* const* a, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_0*>(x);
  const int64_t nb = n / kQK;
  const __m512i eight = _mm512_set1_epi8(8);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512i qb = load_pair(b[i].qs, b[i + 1].qs);
    const __m512i s8 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, qb);
    const float db0 = half(b[i].d), db1 = half(b[i + 1].d);
    for (int r = 0; r < R; ++r) q4_0_pair(a[r] + i, qb, s8, db0, db1, acc[r]);
  }
  if (i < nb) {
    const __m256i qb = load32(b[i].qs);
    const __m256i s8 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), qb);
    for (int r = 0; r < R; ++r) q4_0_single(a[r][i], qb, s8, half(b[i].d), acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r] = hsum256(acc[r]);
}

template <int R>
void q4_1_rows(int64_t n, const block_q4_1* const* a, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_1*>(x);
  const int64_t nb = n / kQK;
  __m256 acc[R];
  float mins[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    mins[r] = 0.0f;
  }
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512i qb = load_pair(b[i].qs, b[i + 1].qs);
    const float db0 = half(b[i].d), db1 = half(b[i + 1].d);
    const float sb0 = half(b[i].s), sb1 = half(b[i + 1].s);
    for (int r = 0; r < R; ++r) q4_1_pair(a[r] + i, qb, db0, db1, sb0, sb1, acc[r], mins[r]);
  }
  if (i < nb) {
    const __m256i qb = load32(b[i].qs);
    for (int r = 0; r < R; ++r) {
      q4_1_single(a[r][i], qb, half(b[i].d), half(b[i].s), acc[r], mins[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum256(acc[r]) + mins[r];
}

template <int R>
void q8_0_rows(int64_t n, const block_q8_0* const* a, const void* x, float* out) {
  assert(n % kQK == 0);
  const auto* b = static_cast<const block_q8_0*>(x);
  const int64_t nb = n / kQK;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512i qb = load_pair(b[i].qs, b[i + 1].qs);
    const float db0 = half(b[i].d), db1 = half(b[i + 1].d);
    for (int r = 0; r < R; ++r) q8_0_pair(a[r] + i, qb, db0, db1, acc[r]);
  }
  if (i < nb) {
    const __m256i qb = load32(b[i].qs);
    for (int r = 0; r < R; ++r) q8_0_single(a[r][i], qb, half(b[i].d), acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r] = hsum256(acc[r]);
}

template <typename Block, void (*Rows1)(int64_t, const Block* const*, const void*, float*)>
float dot_one(int64_t n, const void* w, const void* x) {
  const Block* a[1] = {static_cast<const Block*>(w)};
  float out[1];
  Rows1(n, a, x, out);
  return out[0];
}

template <typename Block, void (*Rows4)(int64_t, const Block* const*, const void*, float*)>
void dot_four(int64_t n, const void* w, size_t ws, const void* x, float* out) {
  const Block* a[4];
  for (int r = 0; r < 4; ++r) a[r] = row_at<Block>(w, ws, r);
  Rows4(n, a, x, out);
}

inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_f16_tail(const uint16_t* p, int64_t rem) {
  const __mmask16 m = static_cast<__mmask16>((1u << rem) - 1u);
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

inline __m512 load_bf16(const uint16_t* p) {
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 load_bf16_tail(const uint16_t* p, int64_t rem) {
  const __mmask16 m = static_cast<__mmask16>((1u << rem) - 1u);
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

// Dot products of plain types: 16-element steps in two accumulators, the last partial step
// through a masked load.
template <__m512 (*Load)(const uint16_t*), __m512 (*LoadTail)(const uint16_t*, int64_t)>
float dot_half_types(int64_t n, const uint16_t* a, const uint16_t* b) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(Load(a + i), Load(b + i), acc0);
    acc1 = _mm512_fmadd_ps(Load(a + i + 16), Load(b + i + 16), acc1);
  }
  if (i + 16 <= n) {
    acc0 = _mm512_fmadd_ps(Load(a + i), Load(b + i), acc0);
    i += 16;
  }
  if (i < n) acc1 = _mm512_fmadd_ps(LoadTail(a + i, n - i), LoadTail(b + i, n - i), acc1);
  return hsum512(_mm512_add_ps(acc0, acc1));
}

float dot_f16_f16(int64_t n, const void* w, const void* x) {
  return dot_half_types<load_f16, load_f16_tail>(n, static_cast<const uint16_t*>(w),
                                                 static_cast<const uint16_t*>(x));
}

float dot_bf16_bf16(int64_t n, const void* w, const void* x) {
  return dot_half_types<load_bf16, load_bf16_tail>(n, static_cast<const uint16_t*>(w),
                                                   static_cast<const uint16_t*>(x));
}

// With AVX512_BF16: vdpbf16ps adds the products of 32 bf16 pairs into 16 float lanes
// (products exact; the odd element of each pair is added first).
float dot_bf16_bf16_native(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a0 = _mm512_loadu_si512(a + i);
    const __m512i b0 = _mm512_loadu_si512(b + i);
    const __m512i a1 = _mm512_loadu_si512(a + i + 32);
    const __m512i b1 = _mm512_loadu_si512(b + i + 32);
    acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)a0, (__m512bh)b0);
    acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)a1, (__m512bh)b1);
  }
  if (i < n) {
    // Up to two masked steps of 32 (zeros contribute nothing).
    for (int step = 0; step < 2 && i < n; ++step, i += 32) {
      const int64_t rem = n - i < 32 ? n - i : 32;
      const __mmask32 m = rem == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << rem) - 1u);
      const __m512i av = _mm512_maskz_loadu_epi16(m, a + i);
      const __m512i bv = _mm512_maskz_loadu_epi16(m, b + i);
      acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)av, (__m512bh)bv);
    }
  }
  return hsum512(_mm512_add_ps(acc0, acc1));
}

float dot_f32_f32(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  if (i + 16 <= n) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    i += 16;
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return hsum512(_mm512_add_ps(acc0, acc1));
}

KernelTable make_table(bool with_bf16) {
  // The quantized dots here give AVX2's bits, so AVX2's tile forms agree with them.
  KernelTable t = avx2_kernel_table();  // encoders, silu, attention, paged attention, tiles
  t.isa = Isa::Avx512;
  t.q4_0.dot = dot_one<block_q4_0, q4_0_rows<1>>;
  t.q4_0.dot4 = dot_four<block_q4_0, q4_0_rows<4>>;
  t.q4_1.dot = dot_one<block_q4_1, q4_1_rows<1>>;
  t.q4_1.dot4 = dot_four<block_q4_1, q4_1_rows<4>>;
  t.q8_0.dot = dot_one<block_q8_0, q8_0_rows<1>>;
  t.q8_0.dot4 = dot_four<block_q8_0, q8_0_rows<4>>;
  t.f16 = dot_by_rows<dot_f16_f16>();
  t.bf16 = with_bf16 ? dot_by_rows<dot_bf16_bf16_native>() : dot_by_rows<dot_bf16_bf16>();
  t.f32 = dot_by_rows<dot_f32_f32>();
  return t;
}

}  // namespace

const KernelTable& avx512_kernel_table(bool with_bf16) {
  static const KernelTable with = make_table(true);
  static const KernelTable without = make_table(false);
  return with_bf16 ? with : without;
}

}  // namespace tokamak::cpu
