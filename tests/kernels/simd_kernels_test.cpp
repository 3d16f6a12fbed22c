// Every SIMD kernel against its scalar twin, for random data and many sizes (including sizes
// that are not multiples of the vector width where the kernel allows them). Conversions must
// be bit-identical; sums may differ only by float rounding in another order.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/rope.h"

namespace tokamak::cpu {
namespace {

using test::random_floats;

const KernelTable& scalar() {
  return scalar_kernel_table();
}

TEST(SimdKernelsTest, ThisCpuHasSomethingToTest) {
  if (test::simd_tables().empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  SUCCEED();
}

TEST(SimdKernelsTest, ConversionsAreBitIdentical) {
  for (const auto& [name, kt] : test::simd_tables()) {
    for (int64_t blocks : {1, 2, 3, 7, 15, 16, 17, 18, 33, 48}) {
      const int64_t n = blocks * 32;
      for (uint64_t seed = 0; seed < 4; ++seed) {
        auto x = random_floats(static_cast<size_t>(n), seed * 31 + blocks, -5.0f, 5.0f);
        if (seed == 1) x[3] = 0.0f;
        if (seed == 2) std::fill(x.begin(), x.begin() + 32, 0.0f);  // an all-zero block
        if (seed == 3) {
          // Exact ties at amax = 127: x * id = k + 0.5.
          x[0] = 127.0f;
          for (int j = 1; j < 32; ++j) x[j] = static_cast<float>(j) - 16.5f;
        }
        std::vector<block_q8_0> a(blocks), b(blocks);
        scalar().to_q8_0(x.data(), a.data(), n);
        kt->to_q8_0(x.data(), b.data(), n);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(block_q8_0)), 0)
            << name << " q8_0 n=" << n << " seed " << seed;
        std::vector<block_q8_1> c(blocks), d(blocks);
        scalar().to_q8_1(x.data(), c.data(), n);
        kt->to_q8_1(x.data(), d.data(), n);
        EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size() * sizeof(block_q8_1)), 0)
            << name << " q8_1 n=" << n << " seed " << seed;
      }
    }
    for (int64_t n : {1, 5, 8, 9, 16, 31, 64, 100, 577}) {
      const auto x = random_floats(static_cast<size_t>(n), n, -70000.0f, 70000.0f);
      std::vector<uint16_t> a(n), b(n);
      scalar().to_f16(x.data(), a.data(), n);
      kt->to_f16(x.data(), b.data(), n);
      EXPECT_EQ(a, b) << name << " f16 n=" << n;
      scalar().to_bf16(x.data(), a.data(), n);
      kt->to_bf16(x.data(), b.data(), n);
      EXPECT_EQ(a, b) << name << " bf16 n=" << n;
    }
  }
}

// |a - b| <= rel * sum|w_i x_i| (+ a tiny absolute floor).
void expect_close(float a, float b, double abs_sum, const std::string& what) {
  EXPECT_LE(std::fabs(static_cast<double>(a) - b), 1e-5 * abs_sum + 1e-30) << what;
}

// Sum of |w_i * x_i| over the decoded rows: the scale of the rounding error of any order.
double abs_dot(DType wt, const std::vector<uint8_t>& w, DType xt, const std::vector<uint8_t>& x,
               int64_t n) {
  std::vector<float> wf(n), xf(n);
  dequantize_row(wt, w.data(), wf.data(), n);
  dequantize_row(xt, x.data(), xf.data(), n);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(wf[i]) * xf[i]);
  return s;
}

struct DotCase {
  DType w;
  DotKernel KernelTable::*kernel;
  ConvertFn KernelTable::*convert;  // nullptr: F32 activations
};
const DotCase kDotCases[] = {
    {DType::Q4_0, &KernelTable::q4_0, &KernelTable::to_q8_0},
    {DType::Q4_1, &KernelTable::q4_1, &KernelTable::to_q8_1},
    {DType::Q8_0, &KernelTable::q8_0, &KernelTable::to_q8_0},
    {DType::F16, &KernelTable::f16, &KernelTable::to_f16},
    {DType::BF16, &KernelTable::bf16, &KernelTable::to_bf16},
    {DType::F32, &KernelTable::f32, nullptr},
};

// The four-row form gives each row bitwise what the one-row form gives (batch invariance of
// matmul rests on this).
// RoPE's rotation: each output is one fma of the same operands in any width, so bit-identical;
// rotated dims past the last full vector, and dims past n_rot (left alone), included.
TEST(SimdKernelsTest, RopeApplyIsBitIdentical) {
  for (const auto& [name, kt] : test::simd_tables()) {
    for (const auto& [head_dim, n_rot] : {std::pair{64, 64}, {128, 128}, {64, 32}, {40, 38},
                                          {16, 6}, {8, 8}}) {
      const int64_t n_heads = 3;
      for (int32_t pos : {0, 1, 17, 4095}) {
        float cos_sin[kMaxHeadDim];
        rope_cos_sin({n_rot, 10000.0f, 1.0f}, pos, cos_sin);
        const auto x = random_floats(static_cast<size_t>(n_heads * head_dim), pos + 7, -3.0f, 3.0f);
        auto want = x;
        auto got = x;
        scalar().rope_apply(want.data(), n_heads, head_dim, n_rot, cos_sin);
        kt->rope_apply(got.data(), n_heads, head_dim, n_rot, cos_sin);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << name << " head_dim " << head_dim << " n_rot " << n_rot << " pos " << pos;
      }
    }
  }
}

TEST(SimdKernelsTest, FourRowFormEqualsOneRowForm) {
  std::vector<test::NamedTable> tables = test::simd_tables();
  tables.push_back({"scalar", &scalar()});
  for (const auto& [name, kt] : tables) {
    for (const DotCase& c : kDotCases) {
      const bool blocks = dtype_info(c.w).block_size > 1;
      for (int64_t n : blocks ? std::vector<int64_t>{32, 64, 96, 576, 1536}
                              : std::vector<int64_t>{1, 7, 16, 33, 64, 100}) {
        const auto wf = random_floats(static_cast<size_t>(4 * n), n, -1.0f, 1.0f);
        const auto xf = random_floats(static_cast<size_t>(n), n + 1, -3.0f, 3.0f);
        const std::vector<uint8_t> w = test::encode_rows(c.w, wf, n);
        std::vector<uint8_t> x(row_bytes(activation_dtype(c.w), n));
        if (c.convert) {
          (kt->*c.convert)(xf.data(), x.data(), n);
        } else {
          std::memcpy(x.data(), xf.data(), x.size());
        }
        const size_t ws = row_bytes(c.w, n);
        float four[4];
        (kt->*c.kernel).dot4(n, w.data(), ws, x.data(), four);
        for (int r = 0; r < 4; ++r) {
          const float one = (kt->*c.kernel).dot(n, w.data() + r * ws, x.data());
          EXPECT_EQ(std::memcmp(&one, &four[r], 4), 0)
              << name << " " << dtype_name(c.w) << " n=" << n << " row " << r;
        }
      }
    }
  }
}

// The tile form (4 weight rows by kTileActRows activation rows) gives each element bitwise
// what the one-row form gives: rows of different magnitudes, all-zero blocks, activation rows
// and outputs at strides other than the row size.
TEST(SimdKernelsTest, TileFormEqualsOneRowForm) {
  std::vector<test::NamedTable> tables = test::simd_tables();
  tables.push_back({"scalar", &scalar()});
  constexpr int R = kTileActRows;
  const float w_scale[4] = {1.0f, 1e-4f, 300.0f, 0.5f};
  const float x_scale[4] = {1.0f, 1e-3f, 100.0f, 3.0f};
  for (const auto& [name, kt] : tables) {
    for (const DotCase& c : kDotCases) {
      const bool blocks = dtype_info(c.w).block_size > 1;
      for (int64_t n : blocks ? std::vector<int64_t>{32, 64, 96, 160, 576, 1536, 4096}
                              : std::vector<int64_t>{1, 7, 16, 33, 64, 100}) {
        for (uint64_t seed = 0; seed < 3; ++seed) {
          auto wf = random_floats(static_cast<size_t>(4 * n), seed + 10 * n, -1.0f, 1.0f);
          auto xf = random_floats(static_cast<size_t>(R * n), seed + 10 * n + 1, -3.0f, 3.0f);
          for (int64_t i = 0; i < 4 * n; ++i) wf[i] *= w_scale[i / n];
          for (int64_t i = 0; i < R * n; ++i) xf[i] *= x_scale[i / n % 4];
          if (seed == 2) {  // an all-zero block in weight row 1 and in activation row R - 1
            std::fill(wf.begin() + n, wf.begin() + n + std::min<int64_t>(n, 32), 0.0f);
            std::fill(xf.begin() + (R - 1) * n, xf.begin() + (R - 1) * n + std::min<int64_t>(n, 32),
                      0.0f);
          }
          const std::vector<uint8_t> w = test::encode_rows(c.w, wf, n);
          const size_t ws = row_bytes(c.w, n);
          const size_t xrow = row_bytes(activation_dtype(c.w), n);
          const size_t xs = xrow + 8;  // padded rows
          std::vector<uint8_t> x(xs * R);
          for (int i = 0; i < R; ++i) {
            if (c.convert) {
              (kt->*c.convert)(xf.data() + i * n, x.data() + i * xs, n);
            } else {
              std::memcpy(x.data() + i * xs, xf.data() + i * n, xrow);
            }
          }
          constexpr int64_t kOutStride = 7;
          std::vector<float> tile(R * kOutStride, -1.0f);
          (kt->*c.kernel).dot4xr(n, w.data(), ws, x.data(), xs, tile.data(), kOutStride);
          for (int i = 0; i < R; ++i) {
            for (int r = 0; r < 4; ++r) {
              const float one = (kt->*c.kernel).dot(n, w.data() + r * ws, x.data() + i * xs);
              EXPECT_EQ(std::memcmp(&one, &tile[i * kOutStride + r], 4), 0)
                  << name << " " << dtype_name(c.w) << " n=" << n << " seed " << seed << " (" << i
                  << "," << r << "): " << one << " vs " << tile[i * kOutStride + r];
            }
          }
        }
      }
    }
  }
}

TEST(SimdKernelsTest, DotProductsMatchScalar) {
  for (const auto& [name, kt] : test::simd_tables()) {
    for (const DotCase& c : kDotCases) {
      const bool blocks = dtype_info(c.w).block_size > 1;
      std::vector<int64_t> sizes;
      if (blocks) {
        for (int64_t b : {1, 2, 3, 4, 5, 17, 18, 48, 96}) sizes.push_back(b * 32);
      } else {
        for (int64_t n = 1; n <= 70; ++n) sizes.push_back(n);
        for (int64_t n : {127, 128, 129, 576, 1536, 2049}) sizes.push_back(n);
      }
      for (int64_t n : sizes) {
        for (uint64_t seed = 0; seed < 3; ++seed) {
          const auto wf = random_floats(static_cast<size_t>(n), seed + 100 * n, -1.0f, 1.0f);
          const auto xf = random_floats(static_cast<size_t>(n), seed + 7 + 100 * n, -3.0f, 3.0f);
          const std::vector<uint8_t> w = test::encode_rows(c.w, wf, n);
          const DType xt = activation_dtype(c.w);
          std::vector<uint8_t> x(row_bytes(xt, n));
          if (c.convert) {
            (scalar().*c.convert)(xf.data(), x.data(), n);
          } else {
            std::memcpy(x.data(), xf.data(), x.size());
          }
          const float ref = (scalar().*c.kernel).dot(n, w.data(), x.data());
          const float got = (kt->*c.kernel).dot(n, w.data(), x.data());
          expect_close(got, ref, abs_dot(c.w, w, xt, x, n),
                       name + " " + std::string(dtype_name(c.w)) + " n=" + std::to_string(n));
        }
      }
    }
  }
}

TEST(SimdKernelsTest, Q8_0HandlesMinus128Weights) {
  // Weights written by other tools may hold -128; the VNNI path must stay exact.
  block_q8_0 w[2], x[2];
  for (int b = 0; b < 2; ++b) {
    w[b].d = x[b].d = f32_to_fp16(1.0f);
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = static_cast<int8_t>(j % 2 ? -128 : 127);
      x[b].qs[j] = static_cast<int8_t>(j % 3 ? 127 : -127);
    }
  }
  const float ref = scalar().q8_0.dot(64, w, x);
  for (const auto& [name, kt] : test::simd_tables()) {
    if (kt->isa == Isa::Avx512) {
      EXPECT_EQ(kt->q8_0.dot(64, w, x), ref) << name;
    }
  }
}

// AVX-512 block dot products accumulate in AVX2's order: the same bits.
TEST(SimdKernelsTest, Avx512QuantizedDotsEqualAvx2) {
  const auto tables = test::simd_tables();
  const KernelTable* avx2 = nullptr;
  for (const auto& t : tables) {
    if (t.table->isa == Isa::Avx2) avx2 = t.table;
  }
  for (const auto& [name, kt] : tables) {
    if (kt->isa != Isa::Avx512 || avx2 == nullptr) continue;
    for (const DotCase& c : kDotCases) {
      if (dtype_info(c.w).block_size == 1) continue;
      for (int64_t blocks : {1, 2, 3, 18, 48}) {
        const int64_t n = blocks * 32;
        const auto wf = random_floats(static_cast<size_t>(4 * n), n + 5, -1.0f, 1.0f);
        const auto xf = random_floats(static_cast<size_t>(n), n + 6, -3.0f, 3.0f);
        const std::vector<uint8_t> w = test::encode_rows(c.w, wf, n);
        std::vector<uint8_t> x(row_bytes(activation_dtype(c.w), n));
        (avx2->*c.convert)(xf.data(), x.data(), n);
        const size_t ws = row_bytes(c.w, n);
        float a[4], b[4];
        (avx2->*c.kernel).dot4(n, w.data(), ws, x.data(), a);
        (kt->*c.kernel).dot4(n, w.data(), ws, x.data(), b);
        EXPECT_EQ(std::memcmp(a, b, sizeof(a)), 0) << name << " " << dtype_name(c.w) << " n=" << n;
        const float one_a = (avx2->*c.kernel).dot(n, w.data(), x.data());
        const float one_b = (kt->*c.kernel).dot(n, w.data(), x.data());
        EXPECT_EQ(std::memcmp(&one_a, &one_b, 4), 0) << name << " " << dtype_name(c.w);
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu
