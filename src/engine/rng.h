#pragma once
// A small, portable pseudo-random generator for sampling: xoshiro256** (Blackman & Vigna),
// seeded through splitmix64. Unlike std::uniform_*_distribution, whose output is left to the
// standard library, every value here is fixed by the algorithm, so a seeded request gives the
// same tokens on every build and platform.

#include <cstdint>

namespace tokamak {

// splitmix64: one step of a 64-bit counter-based mixer; used to expand a seed into state.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    // splitmix64 never yields four zero words in a row, so the state is never all zero.
    uint64_t sm = seed;
    for (uint64_t& word : s_) word = splitmix64(sm);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1): the top 53 bits as a multiple of 2^-53 (exact in a double).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

}  // namespace tokamak
