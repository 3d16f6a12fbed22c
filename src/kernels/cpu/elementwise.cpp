#include "kernels/cpu/elementwise.h"

namespace tokamak::cpu {

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace tokamak::cpu
