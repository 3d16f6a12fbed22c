#include "kernels/cpu/softmax.h"

#include <cassert>
#include <cmath>

namespace tokamak::cpu {

void softmax_row(float* x, int64_t n) {
  assert(n > 0);
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace tokamak::cpu
