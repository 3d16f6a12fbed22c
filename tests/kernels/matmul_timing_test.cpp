// Timing of matmul_rows for the default model's shapes (SmolLM2-135M Q4_1: Q4_1 projections,
// Q8_0 tied output head), one thread, against the plain loop of one dot4 per activation row
// (the form matmul_rows had before the tile kernels). Not a test: disabled by default, run
// with --gtest_also_run_disabled_tests --gtest_filter='*MatmulTiming*'. Times are the
// thread's CPU time; variants alternate in short rounds and the best round counts, since
// the machine may be busy.

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"

namespace tokamak::cpu {
namespace {

// One dot4 per activation row and four weight rows, leftovers through dot.
void matmul_by_dot4(const KernelTable& kt, DType wt, const uint8_t* w, size_t ws, const uint8_t* xq,
                    size_t xs, int64_t m, int64_t k, int64_t n, float* y) {
  const DotKernel& kernel = wt == DType::Q4_1 ? kt.q4_1 : wt == DType::Q4_0 ? kt.q4_0 : kt.q8_0;
  const int64_t tile = std::max<int64_t>(1, static_cast<int64_t>(16 * 1024 / ws));
  for (int64_t t0 = 0; t0 < n; t0 += tile) {
    const int64_t t1 = std::min(n, t0 + tile);
    for (int64_t i = 0; i < m; ++i) {
      int64_t j = t0;
      for (; j + 4 <= t1; j += 4) kernel.dot4(k, w + j * ws, ws, xq + i * xs, y + i * n + j);
      for (; j < t1; ++j) y[i * n + j] = kernel.dot(k, w + j * ws, xq + i * xs);
    }
  }
}

double thread_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Best time of one call over `rounds` rounds of about 10 ms each, in ns.
std::vector<double> best_times(const std::vector<std::function<void()>>& variants, int rounds) {
  std::vector<double> best(variants.size(), 1e30);
  std::vector<int> reps(variants.size(), 1);
  for (size_t v = 0; v < variants.size(); ++v) {
    const double t0 = thread_ns();
    variants[v]();
    reps[v] = std::max(1, static_cast<int>(10e6 / std::max(thread_ns() - t0, 1.0)));
  }
  for (int r = 0; r < rounds; ++r) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const double t0 = thread_ns();
      for (int i = 0; i < reps[v]; ++i) variants[v]();
      best[v] = std::min(best[v], (thread_ns() - t0) / reps[v]);
    }
  }
  return best;
}

TEST(MatmulTiming, DISABLED_DefaultModelShapes) {
  struct Shape {
    DType wt;
    int64_t n, k;
  };
  const Shape shapes[] = {{DType::Q4_1, 576, 576},  {DType::Q4_1, 1536, 576},
                          {DType::Q4_1, 576, 1536}, {DType::Q8_0, 49152, 576},
                          {DType::Q4_0, 1536, 576}, {DType::Q8_0, 1536, 576}};
  for (const auto& [name, kt] : test::simd_tables()) {
    std::printf("%s: ns per (row x column), one thread; dot4 loop -> matmul_rows (speed-up)\n",
                name.c_str());
    for (const Shape& s : shapes) {
      const auto w = test::encode_rows(s.wt, test::random_floats(s.n * s.k, 1), s.k);
      const size_t ws = row_bytes(s.wt, s.k);
      const size_t xs = row_bytes(activation_dtype(s.wt), s.k);
      for (int64_t m : {1, 8, 32, 64}) {
        const auto xf = test::random_floats(m * s.k, 2, -2.0f, 2.0f);
        std::vector<uint8_t> xq(xs * m);
        convert_rows(*kt, s.wt, xf.data(), s.k, s.k, 0, m, xq.data());
        std::vector<float> y0(m * s.n), y1(m * s.n);
        const auto t = best_times(
            {[&] {
               matmul_by_dot4(*kt, s.wt, w.data(), ws, xq.data(), xs, m, s.k, s.n, y0.data());
             },
             [&] {
               matmul_rows(*kt, s.wt, w.data(), ws, xq.data(), xs, m, s.k, 0, s.n, y1.data(), s.n);
             }},
            15);
        EXPECT_EQ(y0, y1);
        const double elems = static_cast<double>(m * s.n);
        std::printf("  %-5s n=%-6lld k=%-5lld m=%-3lld %8.2f -> %8.2f  (x%.2f)\n",
                    std::string(dtype_name(s.wt)).c_str(), static_cast<long long>(s.n),
                    static_cast<long long>(s.k), static_cast<long long>(m), t[0] / elems,
                    t[1] / elems, t[0] / t[1]);
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu
