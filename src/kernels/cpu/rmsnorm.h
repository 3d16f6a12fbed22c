#pragma once
// RMS normalisation of one row, as ggml computes it: the sum of squares in double, then
// y = (x * (1 / sqrt(mean + eps))) * w, each product rounded to float.

#include <cstdint>

namespace tokamak::cpu {

// y (n) = rmsnorm(x (n)) * w (n); y may alias x.
void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps);

}  // namespace tokamak::cpu
