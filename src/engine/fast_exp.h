#pragma once
// exp(x) for x <= 0, as sampling needs it for exp(logit - max): plain IEEE float arithmetic
// (no libm), so it gives the same bits on every platform, and branch-free, so loops over a
// vocabulary vectorise at -O3. Relative error below 3e-7 (tested against std::exp).
//
// Method: x = n * ln2 + r with |r| <= ln2 / 2 (n rounded by the 1.5 * 2^23 trick, ln2 split
// in two for an exact product), exp(r) by its degree-6 Taylor polynomial, times 2^n built in
// the exponent bits. Below -87 (where 2^n would leave the normal range) and for -inf the
// result is exactly 0, so a token masked with -inf can never be drawn.
//
// Bit-exact across platforms only as written: it relies on round-to-nearest and on no
// a * b + c being contracted into an FMA. GCC contracts whenever the target has FMA, even in
// ISO mode, so a file that needs exact results turns that off (sampling_filters.cpp does).

#include <algorithm>
#include <bit>
#include <cstdint>

namespace tokamak {

inline float exp_nonpositive(float x) {
  constexpr uint32_t kLowest = 0xC2AE0000u;  // bits of -87.0f; larger bits = more negative
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t keep = 0u - static_cast<uint32_t>(bits <= kLowest);  // all ones or zero
  x = std::bit_cast<float>(std::min(bits, kLowest));                  // clamp to >= -87

  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  float r = x - n * 0.693145751953125f;   // ln2, high part (exact product for |n| < 2^9)
  r = r - n * 1.428606765330187045e-06f;  // ln2, low part
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto exponent = static_cast<uint32_t>(static_cast<int32_t>(n) + 127);  // in [1, 127]
  const float scale = std::bit_cast<float>(exponent << 23);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * scale) & keep);
}

}  // namespace tokamak
