#pragma once
// Numerically stable softmax of one row in place: exp(x - max) / sum, the sum in double.

#include <cstdint>

namespace tokamak::cpu {

void softmax_row(float* x, int64_t n);

}  // namespace tokamak::cpu
