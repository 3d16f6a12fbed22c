#pragma once
// Scalar forms of the few transcendental and reduction steps where llama.cpp's CPU backend
// (ggml, AVX2 build) rounds in its own way, so that our kernels can reproduce its results
// bit for bit. The quantized models are chaotic: a one-ulp difference anywhere flips some
// 8-bit activation quants and moves the logits by ~0.1, so "close" is not enough to give the
// same tokens as llama.cpp. Everything here uses std::fma where ggml fuses.
//
//   expf_ggml:  ggml's vector expf (after Arm's optimized-routines): n = round(x / ln2) by the
//               1.5 * 2^23 shifter, b = x - n*ln2 (two fused steps, ln2 split hi/lo), a degree-5
//               polynomial in b, scaled by 2^n; |n| > 126 and |n| > 192 take the wide paths.
//   hsum8:      the horizontal sum of an 8-lane register: ((l4+l0) + (l6+l2)) + ((l5+l1) +
//   (l7+l3)).

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tokamak::cpu::ggml {

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float expf_ggml(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const uint32_t e = bits(z) << 23;
  const float k = from_bits(e + bits(1.0f));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  const float an = std::fabs(n);
  if (!(an > 126.0f)) return std::fma(j, k, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = from_bits(g + 0x7f000000u);
  const float s2 = from_bits(e - g);
  if (an > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

// x / (1 + exp(-x)) with the vector exp.
inline float silu_ggml(float x) {
  return x / (1.0f + expf_ggml(0.0f - x));
}

inline float hsum8(const float* l) {
  const float t0 = l[4] + l[0], t1 = l[5] + l[1], t2 = l[6] + l[2], t3 = l[7] + l[3];
  return (t0 + t2) + (t1 + t3);
}

// The reduction of ggml_vec_dot_f16's four 8-lane accumulators (see attention.h).
inline float reduce4x8(const float* a0, const float* a1, const float* a2, const float* a3) {
  float r[8];
  for (int l = 0; l < 8; ++l) r[l] = (a0[l] + a2[l]) + (a1[l] + a3[l]);
  const float t0 = r[0] + r[4], t1 = r[1] + r[5], t2 = r[2] + r[6], t3 = r[3] + r[7];
  return (t0 + t1) + (t2 + t3);
}

}  // namespace tokamak::cpu::ggml
