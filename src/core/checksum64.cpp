#include "core/checksum64.h"

#include <cstring>

namespace tokamak {
namespace {

// Odd 64-bit constants with well-spread bits (from the fractional digits of sqrt(2), sqrt(3),
// sqrt(5)); any odd constants with many bits set would do.
constexpr uint64_t kM1 = 0x6a09e667f3bcc909ull;
constexpr uint64_t kM2 = 0xbb67ae8584caa73bull;
constexpr uint64_t kM3 = 0x3c6ef372fe94f82bull;

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // little-endian on every machine we build for
  return v;
}

inline uint64_t round(uint64_t lane, uint64_t word) {
  return rotl(lane + word * kM2, 29) * kM1;
}

// Final avalanche: each input bit flips about half of the output bits.
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 32;
  h *= kM2;
  h ^= h >> 29;
  h *= kM3;
  h ^= h >> 32;
  return h;
}

}  // namespace

uint64_t checksum64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {seed + kM1, seed ^ kM2, seed - kM3, ~seed};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) lane[l] = round(lane[l], load64(p + i + 8 * l));
  }
  uint64_t h = static_cast<uint64_t>(n) * kM3;
  for (int l = 0; l < 4; ++l) h = rotl(h ^ avalanche(lane[l]), 27) * kM1 + kM2;
  for (; i + 8 <= n; i += 8) h = rotl(h ^ round(0, load64(p + i)), 27) * kM1 + kM3;
  for (; i < n; ++i) h = rotl(h ^ (uint64_t{p[i]} * kM3), 11) * kM1;
  return avalanche(h);
}

}  // namespace tokamak
