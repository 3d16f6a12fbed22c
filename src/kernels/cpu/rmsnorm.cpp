#include "kernels/cpu/rmsnorm.h"

#include <cmath>

namespace tokamak::cpu {
float rmsnorm_scale_of_sum(double sum, int64_t n, float eps) {
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

namespace {

// Rows [0, R) of x: R independent sums, element i of every row before element i + 1.
template <int R>
void scales_of_rows(const float* x, int64_t x_stride, int64_t n, float eps, float* scales) {
  double sum[R] = {};
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < R; ++r) {
      const float v = x[r * x_stride + i];
      sum[r] += static_cast<double>(v * v);
    }
  }
  for (int r = 0; r < R; ++r) scales[r] = rmsnorm_scale_of_sum(sum[r], n, eps);
}

}  // namespace

void rmsnorm_scales(const float* x, int64_t x_stride, int64_t rows, int64_t n, float eps,
                    float* scales) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) scales_of_rows<8>(x + r * x_stride, x_stride, n, eps, scales + r);
  if (r + 4 <= rows) {
    scales_of_rows<4>(x + r * x_stride, x_stride, n, eps, scales + r);
    r += 4;
  }
  for (; r < rows; ++r) scales_of_rows<1>(x + r * x_stride, x_stride, n, eps, scales + r);
}

void rmsnorm_apply(const float* x, float scale, const float* w, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void rmsnorm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
  float scale = 0.0f;
  rmsnorm_scales(x, n, 1, n, eps, &scale);
  rmsnorm_apply(x, scale, w, y, n);
}

}  // namespace tokamak::cpu
