#pragma once
// Element-wise arithmetic on rows.

#include <cstdint>

namespace tokamak::cpu {

// out = a + b over n elements; out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n);

}  // namespace tokamak::cpu
