// AVX-512 (F/BW/VL/DQ + VNNI, and BF16 where the CPU has it) kernel table. This file is
// compiled with those extensions and only called when the CPU has them. The quantized dot
// products (Q4_0, Q4_1, Q8_0: dot, dot4 and the dot4xr tile) are in quant_dots_avx512.cpp: they
// use vpdpbusd for the exact integer sums and keep AVX2's float order, so quantized models give
// the same bits as with the AVX2 table (and as llama.cpp's AVX2 build). The Q8_0 / Q8_1
// activation encoders (activation_encode_avx512.cpp), RMSNorm's row scales (rmsnorm_avx512.cpp),
// the packed matmuls and paged attention have AVX-512 forms with AVX2's bits; silu, attention, the
// F16 encoder and the F16 dot are the AVX2 ones: F16 models then give AVX2's bits too, which the
// F16 golden test against llama.cpp needs (a 16-lane F16 dot, measured on Zen 4, was 10% slower at
// k = 576, even at 1536 and 12% faster at 4096). The BF16 and F32 dots here use 16-lane
// accumulators and round differently from AVX2.

#include <cstdint>

#include "kernels/cpu/activation_encode_avx512.h"
#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_matmul_avx512.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant_dots_avx512.h"
#include "kernels/cpu/rmsnorm_avx512.h"

namespace tokamak::cpu {
namespace {

// These small helpers repeat some of simd_avx2.h on purpose: an inline function compiled in
// this file may carry AVX-512 encodings, and if it had external linkage under the same name
// as an AVX2 file's copy, the linker could hand the AVX-512 one to the AVX2 path and crash an
// AVX2-only CPU. Keeping them in this file's anonymous namespace rules that out.
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

inline __m512 load_bf16(const uint16_t* p) {
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
inline __m512 load_bf16_tail(const uint16_t* p, int64_t rem) {
  const __mmask16 m = static_cast<__mmask16>((1u << rem) - 1u);
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

// BF16 dot product: 16-element steps in two accumulators, the last partial step through a
// masked load.
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
  KernelTable t = avx2_kernel_table();  // silu, attention, the F16 encoder and dot
  t.isa = Isa::Avx512;
  t.to_q8_0 = avx512::to_q8_0;
  t.to_q8_1 = avx512::to_q8_1;
  t.rmsnorm_scales = avx512::rmsnorm_scales;
  t.q4_0 = avx512::q4_0_dots();
  t.q4_1 = avx512::q4_1_dots();
  t.q8_0 = avx512::q8_0_dots();
  t.bf16 = with_bf16 ? dot_by_rows<dot_bf16_bf16_native>() : dot_by_rows<dot_bf16_bf16>();
  t.f32 = dot_by_rows<dot_f32_f32>();
  t.q4_0x8 = avx512::packed_matmul_q4_0;
  t.q4_1x8 = avx512::packed_matmul_q4_1;
  t.q8_0x8 = avx512::packed_matmul_q8_0;
  t.paged_attention_span = avx512::paged_attention_span;
  t.paged_attention_queries = avx512::paged_attention_queries;
  return t;
}

}  // namespace

const KernelTable& avx512_kernel_table(bool with_bf16) {
  static const KernelTable with = make_table(true);
  static const KernelTable without = make_table(false);
  return with_bf16 ? with : without;
}

}  // namespace tokamak::cpu
