#pragma once
// Small AVX2 + FMA + F16C helpers shared by the *_avx2.cpp kernel files (and the AVX-512 one).
// Include only from files compiled with those flags.

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd_avx2.h needs -mavx2 -mfma -mf16c (include it from *_avx2.cpp / *_avx512.cpp only)"
#endif

#include <immintrin.h>

#include <cstdint>

namespace tokamak::cpu::avx2 {

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
// the high nibbles (GGML's order).
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

// ggml-exact silu * up and attention (attention_avx2.cpp): see ggml_math.h, attention.h.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void attention(const float* q, const uint16_t* k, int64_t k_stride, const uint16_t* v,
               int64_t v_stride, int64_t n_kv, int32_t dk, int32_t dv, float scale,
               bool single_token_order, float* out, float* s, uint16_t* p16);

}  // namespace tokamak::cpu::avx2
