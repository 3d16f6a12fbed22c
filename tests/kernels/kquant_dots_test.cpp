// The 5-bit and K-quant weight types (Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): the scalar dot products
// against a double sum over the decoded operands, and every SIMD form (dot, dot4, dot4xr)
// bitwise against the scalar dot. Weights are random bytes (every code, scale and min the
// format can hold, not only what our encoders write), with f16 scales in a sane range.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize.h"

namespace tokamak::cpu {
namespace {

struct KQuantCase {
  DType w;
  DotKernel KernelTable::*kernel;
  ConvertFn KernelTable::*convert;
};
const KQuantCase kKQuantCases[] = {
    {DType::Q5_0, &KernelTable::q5_0, &KernelTable::to_q8_0},
    {DType::Q5_1, &KernelTable::q5_1, &KernelTable::to_q8_1},
    {DType::Q4_K, &KernelTable::q4_k, &KernelTable::to_q8_K},
    {DType::Q5_K, &KernelTable::q5_k, &KernelTable::to_q8_K},
    {DType::Q6_K, &KernelTable::q6_k, &KernelTable::to_q8_K},
};

std::vector<int64_t> kquant_sizes(DType w) {
  if (dtype_info(w).block_size == kQK_K) return {256, 512, 768, 1536, 2048, 4096};
  return {32, 64, 96, 160, 576, 1536};
}

// A positive f16 scale in [2^-14, 2^-2): where real block scales live.
uint16_t kquant_scale_half(std::mt19937_64& rng) {
  return static_cast<uint16_t>((1 + rng() % 12) << 10 | rng() % 1024);
}

// `rows` rows of n elements of type w: random bytes, the f16 fields replaced by sane scales
// (Q5_1's min with either sign).
std::vector<uint8_t> random_kquant_weights(DType w, int64_t rows, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(row_bytes(w, n) * static_cast<size_t>(rows));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  const size_t block = dtype_info(w).type_size;
  for (size_t at = 0; at < out.size(); at += block) {
    uint8_t* p = out.data() + at;
    const auto set = [&](size_t offset, uint16_t h) { std::memcpy(p + offset, &h, 2); };
    switch (w) {
      case DType::Q5_0:
        set(offsetof(block_q5_0, d), kquant_scale_half(rng));
        break;
      case DType::Q5_1:
        set(offsetof(block_q5_1, d), kquant_scale_half(rng));
        set(offsetof(block_q5_1, m), kquant_scale_half(rng) | (rng() % 2 ? 0x8000 : 0));
        break;
      case DType::Q4_K:
        set(offsetof(block_q4_K, d), kquant_scale_half(rng));
        set(offsetof(block_q4_K, dmin), kquant_scale_half(rng));
        break;
      case DType::Q5_K:
        set(offsetof(block_q5_K, d), kquant_scale_half(rng));
        set(offsetof(block_q5_K, dmin), kquant_scale_half(rng));
        break;
      case DType::Q6_K:
        set(offsetof(block_q6_K, d), kquant_scale_half(rng));
        break;
      default:
        ADD_FAILURE() << "no random blocks for " << dtype_name(w);
    }
  }
  return out;
}

// `rows` activation rows for weight type w, encoded by the scalar table from random floats of
// varied magnitude per row (and an all-zero stretch in the last row).
std::vector<uint8_t> random_kquant_activations(const KQuantCase& c, int64_t rows, int64_t n,
                                               uint64_t seed) {
  auto xf = test::random_floats(static_cast<size_t>(rows * n), seed, -3.0f, 3.0f);
  const float row_scale[4] = {1.0f, 1e-3f, 100.0f, 0.25f};
  for (int64_t i = 0; i < rows * n; ++i) xf[i] *= row_scale[i / n % 4];
  std::fill(xf.end() - std::min<int64_t>(n, 256), xf.end(), 0.0f);
  const size_t xrow = row_bytes(activation_dtype(c.w), n);
  std::vector<uint8_t> x(xrow * static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    (scalar_kernel_table().*c.convert)(xf.data() + i * n, x.data() + i * xrow, n);
  }
  return x;
}

// The scalar dot is Σ w x over the decoded operands, the mins taken against the activation
// sums the encoding stores (Q8_1's s, Q8_K's bsums), which is what the decoded values give
// for Q8_K (exact integer sums) and what the stored s stands for in Q8_1.
TEST(KQuantDotsTest, ScalarDotEqualsSumOfDecodedOperands) {
  for (const KQuantCase& c : kKQuantCases) {
    for (int64_t n : kquant_sizes(c.w)) {
      const auto w = random_kquant_weights(c.w, 1, n, n + 1);
      const auto x = random_kquant_activations(c, 1, n, n + 2);
      const DType xt = activation_dtype(c.w);
      const auto wd = test::decode_rows(c.w, w.data(), 1, n);
      const auto xd = test::decode_rows(xt, x.data(), 1, n);
      double ref = 0.0;
      double mag = 0.0;
      for (int64_t p = 0; p < n; ++p) {
        ref += static_cast<double>(wd[p]) * xd[p];
        mag += std::fabs(static_cast<double>(wd[p]) * xd[p]);
      }
      if (c.w == DType::Q5_1) {  // min * s, not min * Σ x (as for Q4_1)
        const auto* wb = reinterpret_cast<const block_q5_1*>(w.data());
        const auto* xb = reinterpret_cast<const block_q8_1*>(x.data());
        for (int64_t b = 0; b < n / kQK; ++b) {
          double sx = 0.0;
          for (int p = 0; p < kQK; ++p) sx += xd[b * kQK + p];
          ref += static_cast<double>(fp16_to_f32(wb[b].m)) * (fp16_to_f32(xb[b].s) - sx);
        }
      }
      const float got = (scalar_kernel_table().*c.kernel).dot(n, w.data(), x.data());
      EXPECT_NEAR(got, ref, 2e-6 * mag + 1e-30) << dtype_name(c.w) << " n=" << n;
    }
  }
}

// Every SIMD form gives the scalar dot's bits: the integer sums are exact and the float steps
// per block are the scalar ones (kquant_dots.h).
TEST(KQuantDotsTest, SimdFormsEqualScalarBitwise) {
  constexpr int R = kTileActRows;
  for (const auto& [name, kt] : test::simd_tables()) {
    for (const KQuantCase& c : kKQuantCases) {
      for (int64_t n : kquant_sizes(c.w)) {
        for (uint64_t seed = 0; seed < 3; ++seed) {
          const auto w = random_kquant_weights(c.w, 4, n, seed * 1000 + n);
          const auto x = random_kquant_activations(c, R, n, seed * 1000 + n + 1);
          const size_t ws = row_bytes(c.w, n);
          const size_t xs = row_bytes(activation_dtype(c.w), n);
          const std::string what = name + " " + std::string(dtype_name(c.w)) +
                                   " n=" + std::to_string(n) + " seed " + std::to_string(seed);
          const DotKernel& k = kt->*c.kernel;
          constexpr int64_t kOutStride = 5;
          std::vector<float> tile(R * kOutStride, -1.0f);
          k.dot4xr(n, w.data(), ws, x.data(), xs, tile.data(), kOutStride);
          for (int i = 0; i < R; ++i) {
            float four[4];
            k.dot4(n, w.data(), ws, x.data() + i * xs, four);
            for (int r = 0; r < 4; ++r) {
              const float ref =
                  (scalar_kernel_table().*c.kernel).dot(n, w.data() + r * ws, x.data() + i * xs);
              const float one = k.dot(n, w.data() + r * ws, x.data() + i * xs);
              EXPECT_EQ(std::memcmp(&ref, &one, 4), 0) << what << " dot " << ref << " " << one;
              EXPECT_EQ(std::memcmp(&ref, &four[r], 4), 0) << what << " dot4 row " << r;
              EXPECT_EQ(std::memcmp(&ref, &tile[i * kOutStride + r], 4), 0)
                  << what << " dot4xr (" << i << "," << r << ")";
            }
          }
        }
      }
    }
  }
}

// Q8_K rows from the SIMD encoder are the scalar encoder's, byte for byte: ties at amax = 127,
// an all-zero super-block, a single large element.
TEST(KQuantDotsTest, Q8_KEncoderBitIdentical) {
  for (const auto& [name, kt] : test::simd_tables()) {
    for (int64_t blocks : {1, 2, 3, 9}) {
      const int64_t n = blocks * kQK_K;
      for (uint64_t seed = 0; seed < 4; ++seed) {
        auto x = test::random_floats(static_cast<size_t>(n), seed * 31 + blocks, -5.0f, 5.0f);
        if (seed == 1) std::fill(x.begin(), x.begin() + kQK_K, 0.0f);
        if (seed == 2) {
          x[0] = 127.0f;  // x * id = x: ties at every .5
          for (int j = 1; j < kQK_K; ++j) x[j] = static_cast<float>(j % 64) - 31.5f;
        }
        if (seed == 3) x[5] = -1e6f;
        std::vector<block_q8_K> a(blocks), b(blocks);
        scalar_kernel_table().to_q8_K(x.data(), a.data(), n);
        kt->to_q8_K(x.data(), b.data(), n);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(block_q8_K)), 0)
            << name << " n=" << n << " seed " << seed;
      }
    }
  }
}

TEST(KQuantDotsTest, ActivationTypes) {
  EXPECT_EQ(activation_dtype(DType::Q5_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::Q5_1), DType::Q8_1);
  EXPECT_EQ(activation_dtype(DType::Q4_K), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::Q5_K), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::Q6_K), DType::Q8_K);
  for (const KQuantCase& c : kKQuantCases) EXPECT_TRUE(matmul_supports(c.w)) << dtype_name(c.w);
  EXPECT_FALSE(matmul_supports(DType::Q2_K));
  EXPECT_FALSE(matmul_supports(DType::Q8_K));
}

}  // namespace
}  // namespace tokamak::cpu
