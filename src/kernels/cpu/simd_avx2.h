#pragma once
// Small AVX2 + FMA + F16C helpers shared by the *_avx2.cpp kernel files and the AVX-512 ones.
// Include only from files compiled with those flags.
//
// The helpers have internal linkage (an unnamed namespace): a copy compiled in an AVX-512 file
// may carry AVX-512 encodings, and with external linkage the linker could hand that copy to
// the AVX2 path and crash an AVX2-only CPU. Each file keeps its own.

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd_avx2.h needs -mavx2 -mfma -mf16c (include it from *_avx2.cpp / *_avx512.cpp only)"
#endif

#include <immintrin.h>

#include <cstdint>

namespace tokamak::cpu::avx2 {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half(uint16_t h) {
  return _cvtsh_ss(h);
}

// 16 bytes of nibbles -> 32 bytes 0..15: elements 0..15 from the low nibbles, 16..31 from
// the high nibbles (GGML's order). The bytes go to both halves, the upper one shifted right
// by 4, then masked: three instructions.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i bytes =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi64(bytes, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

inline __m256i load32(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Sums of products of u (unsigned, <= 127) and s (signed) in 8 int32 lanes. maddubs cannot
// saturate here: |pair| <= 2 * 127 * 127 < 32767.
inline __m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

inline __m256i dot_s8_s8(__m256i a, __m256i b) {
  return dot_u8_s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// n floats to F16, round to nearest even (F16C), any n.
inline void to_f16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = static_cast<uint16_t>(_cvtss_sh(x[i], 0));
}

// ggml's vector exp (see ggml_math.h for the steps; the scalar form there is its twin): a couple
// of ulp from expf; exp(-inf) = 0, so masked (-inf) lanes get zero weight.
inline __m256 exp_ggml(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
  const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(
          _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
          _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  const __m256 normal = _mm256_fmadd_ps(j, k, k);
  if (_mm256_movemask_ps(c) == 0) return normal;
  const __m256i g =
      _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                       _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 d = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 wide = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
  return _mm256_blendv_ps(_mm256_blendv_ps(normal, wide, c), _mm256_mul_ps(s1, s1), d);
}

// silu(gate) * up in 8 lanes, as silu_mul computes each whole group of 8 (ggml's rounding,
// ggml_math.h).
inline __m256 silu_mul8(__m256 gate, __m256 up) {
  const __m256 e = exp_ggml(_mm256_sub_ps(_mm256_setzero_ps(), gate));
  const __m256 silu = _mm256_div_ps(gate, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_mul_ps(silu, up);
}

}  // namespace

// ggml-exact silu * up and attention (attention_avx2.cpp): see ggml_math.h, attention.h.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void attention(const float* q, const uint16_t* k, int64_t k_stride, const uint16_t* v,
               int64_t v_stride, int64_t n_kv, int32_t dk, int32_t dv, float scale,
               bool single_token_order, float* out, float* s, uint16_t* p16);

}  // namespace tokamak::cpu::avx2
