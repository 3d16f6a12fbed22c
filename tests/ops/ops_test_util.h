#pragma once
// Helpers shared by the op tests: seeded random data and the kernel levels this CPU runs.

#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu_features.h"

namespace tokamak::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every kernel level this CPU supports, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::Scalar};
  const Isa best = best_isa(cpu_features());
  if (best >= Isa::Avx2) out.push_back(Isa::Avx2);
  if (best >= Isa::Avx512) out.push_back(Isa::Avx512);
  return out;
}

}  // namespace tokamak::test
