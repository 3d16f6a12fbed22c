#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"

namespace tokamak::cpu {
namespace {

using test::all_tables;
using test::random_floats;

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                              DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K};

// A row length for weight type wt: k, or 512 for the K-quants (whole 256-element super-blocks).
int64_t row_length(DType wt, int64_t k) {
  return dtype_info(wt).block_size == 256 ? 512 : k;
}

// Encodes activations as the matmul front-end does.
std::vector<uint8_t> encode_activations(const KernelTable& kt, DType wt,
                                        const std::vector<float>& x, int64_t m, int64_t k) {
  if (wt == DType::F32) {
    std::vector<uint8_t> out(x.size() * sizeof(float));
    std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  std::vector<uint8_t> out(row_bytes(activation_dtype(wt), k) * static_cast<size_t>(m));
  convert_rows(kt, wt, x.data(), k, k, 0, m, out.data());
  return out;
}

TEST(MatmulTest, MatchesDoubleLoopOverDecodedOperands) {
  const int64_t m = 5, n = 37;
  for (const KernelTable* kt : all_tables()) {
    for (DType wt : kWeightTypes) {
      const int64_t k = row_length(wt, 96);
      const auto wf = random_floats(static_cast<size_t>(n * k), 1, -1.0f, 1.0f);
      const auto xf = random_floats(static_cast<size_t>(m * k), 2, -2.0f, 2.0f);
      const auto w = test::encode_rows(wt, wf, k);
      const auto xq = encode_activations(*kt, wt, xf, m, k);
      const DType at = activation_dtype(wt);
      const auto wd = test::decode_rows(wt, w.data(), n, k);
      const auto xd = test::decode_rows(at, xq.data(), m, k);
      std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
      matmul_rows(*kt, wt, w.data(), row_bytes(wt, k), xq.data(), row_bytes(at, k), m, k, 0, n,
                  y.data(), n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0.0, mag = 0.0;
          for (int64_t p = 0; p < k; ++p) {
            ref += static_cast<double>(wd[j * k + p]) * xd[i * k + p];
            mag += std::fabs(static_cast<double>(wd[j * k + p]) * xd[i * k + p]);
          }
          if (wt == DType::Q4_1 || wt == DType::Q5_1) {
            // Q4_1 · Q8_1 (Q5_1 too) takes sum(x) of a block from the stored s = fp16(d *
            // sum(q)), not from the decoded values: replace min * sum(x) by min * s.
            const uint8_t* wrow = w.data() + j * row_bytes(wt, k);
            const auto* xb = reinterpret_cast<const block_q8_1*>(xq.data() + i * row_bytes(at, k));
            for (int64_t b = 0; b < k / 32; ++b) {
              double sx = 0.0;
              for (int p = 0; p < 32; ++p) sx += xd[i * k + b * 32 + p];
              const uint16_t m = wt == DType::Q4_1 ? reinterpret_cast<const block_q4_1*>(wrow)[b].m
                                                   : reinterpret_cast<const block_q5_1*>(wrow)[b].m;
              ref += static_cast<double>(fp16_to_f32(m)) * (fp16_to_f32(xb[b].s) - sx);
            }
          }
          EXPECT_NEAR(y[i * n + j], ref, 1e-5 * mag + 1e-6)
              << isa_name(kt->isa) << " " << dtype_name(wt) << " (" << i << "," << j << ")";
        }
      }
    }
  }
}

// The result for one output element must not depend on the number of activation rows, on
// which range of weight rows a call computes, or on tiling.
TEST(MatmulTest, BatchInvariantBitwise) {
  const int64_t m = 9, n = 300;
  for (const KernelTable* kt : all_tables()) {
    for (DType wt : kWeightTypes) {
      const int64_t k = row_length(wt, 160);
      const auto wf = random_floats(static_cast<size_t>(n * k), 3);
      const auto xf = random_floats(static_cast<size_t>(m * k), 4, -3.0f, 3.0f);
      const auto w = test::encode_rows(wt, wf, k);
      const auto xq = encode_activations(*kt, wt, xf, m, k);
      const size_t xs = wt == DType::F32 ? k * sizeof(float) : row_bytes(activation_dtype(wt), k);
      std::vector<float> full(static_cast<size_t>(m * n));
      matmul_rows(*kt, wt, w.data(), row_bytes(wt, k), xq.data(), xs, m, k, 0, n, full.data(), n);
      // One activation row at a time, in uneven column ranges.
      std::vector<float> part(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i) {
        const auto xi = encode_activations(
            *kt, wt, std::vector<float>(xf.begin() + i * k, xf.begin() + (i + 1) * k), 1, k);
        for (int64_t j0 = 0; j0 < n; j0 += 77) {
          matmul_rows(*kt, wt, w.data(), row_bytes(wt, k), xi.data(), xs, 1, k, j0,
                      std::min(n, j0 + 77), part.data() + i * n, n);
        }
      }
      EXPECT_EQ(std::memcmp(full.data(), part.data(), full.size() * sizeof(float)), 0)
          << isa_name(kt->isa) << " " << dtype_name(wt);
    }
  }
}

// matmul_rows over m activation rows (tiles of kTileActRows rows, then the rest) gives the
// same bits as one call per row, for k from 32 to 4096, m from 1 to 70, a column range that
// starts and ends off a multiple of 4; columns outside the range stay untouched.
TEST(MatmulTest, TiledRowsEqualSingleRowsBitwise) {
  const int64_t n = 45, j0 = 3, j1 = 42, max_m = 70;
  std::vector<int64_t> all_m;
  for (int64_t m = 1; m <= max_m; ++m) all_m.push_back(m);
  const std::vector<int64_t> some_m = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 32, 33, 64, 65, 70};
  for (const KernelTable* kt : all_tables()) {
    for (DType wt : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q5_0, DType::Q5_1, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K}) {
      for (int64_t k : {32, 96, 256, 576, 1536, 4096}) {
        if (k % dtype_info(wt).block_size != 0) continue;
        const auto wf = random_floats(static_cast<size_t>(n * k), k + 1);
        const auto xf = random_floats(static_cast<size_t>(max_m * k), k + 2, -3.0f, 3.0f);
        const auto w = test::encode_rows(wt, wf, k);
        const auto xq = encode_activations(*kt, wt, xf, max_m, k);
        const size_t ws = row_bytes(wt, k);
        const size_t xs = row_bytes(activation_dtype(wt), k);
        const float untouched = -7.0f;
        std::vector<float> single(static_cast<size_t>(max_m * n), untouched);
        for (int64_t i = 0; i < max_m; ++i) {
          matmul_rows(*kt, wt, w.data(), ws, xq.data() + i * xs, xs, 1, k, j0, j1,
                      single.data() + i * n, n);
        }
        for (int64_t m : k <= 576 ? all_m : some_m) {
          std::vector<float> tiled(static_cast<size_t>(m * n), untouched);
          matmul_rows(*kt, wt, w.data(), ws, xq.data(), xs, m, k, j0, j1, tiled.data(), n);
          EXPECT_EQ(std::memcmp(tiled.data(), single.data(), tiled.size() * sizeof(float)), 0)
              << isa_name(kt->isa) << " " << dtype_name(wt) << " k=" << k << " m=" << m;
        }
      }
    }
  }
}

TEST(MatmulTest, ActivationTypes) {
  EXPECT_EQ(activation_dtype(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::Q8_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::Q4_1), DType::Q8_1);
  EXPECT_EQ(activation_dtype(DType::F16), DType::F16);
  EXPECT_EQ(activation_dtype(DType::BF16), DType::BF16);
  EXPECT_EQ(activation_dtype(DType::F32), DType::F32);
  EXPECT_TRUE(matmul_supports(DType::Q4_1));
  EXPECT_TRUE(matmul_supports(DType::Q5_0));
  EXPECT_TRUE(matmul_supports(DType::Q6_K));
  EXPECT_FALSE(matmul_supports(DType::Q3_K));
  EXPECT_FALSE(matmul_supports(DType::Q8_1));
}

}  // namespace
}  // namespace tokamak::cpu
