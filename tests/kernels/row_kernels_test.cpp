// rmsnorm, rope, softmax, silu_mul, add and embedding against plain double loops.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"

namespace tokamak::cpu {
namespace {

using test::random_floats;

TEST(RowKernelsTest, RmsNorm) {
  for (int64_t n : {1, 7, 64, 576}) {
    const auto x = random_floats(static_cast<size_t>(n), n, -3.0f, 3.0f);
    const auto w = random_floats(static_cast<size_t>(n), n + 1, 0.5f, 1.5f);
    std::vector<float> y(n);
    rmsnorm_row(x.data(), w.data(), y.data(), n, 1e-5f);
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-5) << n;
    // In place gives the same.
    auto z = x;
    rmsnorm_row(z.data(), w.data(), z.data(), n, 1e-5f);
    EXPECT_EQ(z, y);
  }
}

// Several rows' sums side by side give each row's scale bit for bit as ggml's loop does:
// float squares added to a double one element after the other, then float arithmetic. For
// the scalar form and every SIMD level's (groups of eight and sixteen rows, the rest, element
// tails short of eight).
TEST(RowKernelsTest, RmsNormScalesOfManyRowsAreEachRowsOwn) {
  using ScalesFn = void (*)(const float*, int64_t, int64_t, int64_t, float, float*);
  std::vector<std::pair<std::string, ScalesFn>> forms = {{"scalar", rmsnorm_scales}};
  for (const auto& [name, kt] : test::simd_tables()) forms.emplace_back(name, kt->rmsnorm_scales);
  const float eps = 1e-6f;
  for (const auto& [name, scales] : forms) {
    for (int64_t n : {1, 7, 8, 13, 576}) {
      for (int64_t rows : {1, 3, 4, 8, 13, 16, 19, 24, 33}) {
        const int64_t stride = n + 5;  // rows apart, as in a strided view
        auto x = random_floats(static_cast<size_t>(rows * stride), rows * 100 + n, -4.0f, 4.0f);
        // Magnitudes over ten decades: the double sums round (though float scales rarely show it).
        const auto decades = random_floats(x.size(), rows * 100 + n + 1, -6.0f, 4.0f);
        for (size_t i = 0; i < x.size(); ++i) x[i] *= std::pow(10.0f, std::round(decades[i]));
        std::vector<float> got(static_cast<size_t>(rows));
        scales(x.data(), stride, rows, n, eps, got.data());
        for (int64_t r = 0; r < rows; ++r) {
          double sum = 0.0;
          for (int64_t i = 0; i < n; ++i) {
            const float v = x[static_cast<size_t>(r * stride + i)];
            sum += static_cast<double>(v * v);
          }
          const float mean = static_cast<float>(sum / static_cast<double>(n));
          const float want = 1.0f / std::sqrt(mean + eps);
          EXPECT_EQ(got[static_cast<size_t>(r)], want)
              << name << " n=" << n << " rows=" << rows << " r=" << r;
        }
      }
    }
  }
}

TEST(RowKernelsTest, RopeRotatesAdjacentPairsOfTheFirstNRotDims) {
  const int64_t n_heads = 3, head_dim = 16;
  for (int32_t n_rot : {16, 8, 2}) {
    for (float freq_scale : {1.0f, 0.25f}) {
      for (int32_t pos : {0, 1, 7, 100, 1000}) {
        const RopeConfig cfg{n_rot, 10000.0f, freq_scale};
        const auto x = random_floats(static_cast<size_t>(n_heads * head_dim), pos + n_rot);
        auto y = x;
        std::vector<float> cs(n_rot);
        rope_cos_sin(cfg, pos, cs.data());
        rope_apply(y.data(), n_heads, head_dim, n_rot, cs.data());
        for (int64_t h = 0; h < n_heads; ++h) {
          for (int64_t i = 0; i < head_dim; i += 2) {
            const float* a = &x[h * head_dim + i];
            const float* b = &y[h * head_dim + i];
            if (i >= n_rot) {
              EXPECT_EQ(b[0], a[0]);
              EXPECT_EQ(b[1], a[1]);
              continue;
            }
            const double theta = static_cast<double>(pos) * freq_scale *
                                 std::pow(10000.0, -static_cast<double>(i) / n_rot);
            const double r0 = a[0] * std::cos(theta) - a[1] * std::sin(theta);
            const double r1 = a[0] * std::sin(theta) + a[1] * std::cos(theta);
            EXPECT_NEAR(b[0], r0, 2e-4) << "pos " << pos << " i " << i;
            EXPECT_NEAR(b[1], r1, 2e-4) << "pos " << pos << " i " << i;
          }
        }
      }
    }
  }
}

TEST(RowKernelsTest, Softmax) {
  for (int64_t n : {1, 2, 10, 1000}) {
    auto x = random_floats(static_cast<size_t>(n), n, -20.0f, 20.0f);
    const auto orig = x;
    softmax_row(x.data(), n);
    double mx = orig[0];
    for (float v : orig) mx = std::max<double>(mx, v);
    double sum = 0.0;
    for (float v : orig) sum += std::exp(v - mx);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(x[i], std::exp(orig[i] - mx) / sum, 1e-6);
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(RowKernelsTest, SiluMulAndAdd) {
  const int64_t n = 100;
  const auto g = random_floats(n, 1, -8.0f, 8.0f);
  const auto u = random_floats(n, 2, -2.0f, 2.0f);
  std::vector<float> out(n), sum(n);
  scalar_kernel_table().silu_mul(g.data(), u.data(), out.data(), n);
  add(g.data(), u.data(), sum.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double s = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
    EXPECT_NEAR(out[i], s * u[i], 1e-5 * (1.0 + std::fabs(s * u[i])));
    EXPECT_EQ(sum[i], g[i] + u[i]);
  }
}

TEST(RowKernelsTest, EmbeddingDecodesOneRowOfEveryType) {
  const int64_t rows = 10, n = 64;
  const auto table = random_floats(static_cast<size_t>(rows * n), 3);
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1}) {
    const auto enc = test::encode_rows(d, table, n);
    const auto dec = test::decode_rows(d, enc.data(), rows, n);
    std::vector<float> out(n);
    embedding_row(d, enc.data(), row_bytes(d, n), 7, n, out.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], dec[7 * n + i]) << dtype_name(d);
  }
}

}  // namespace
}  // namespace tokamak::cpu
