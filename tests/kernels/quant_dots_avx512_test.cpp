// The AVX-512 quantized dot products (quant_dots_avx512.cpp) against the AVX2 table, bitwise:
// dot, dot4 and the dot4xr tile for Q4_0, Q4_1 and Q8_0, on raw blocks of random bits (every
// quant value, -128 weights for Q8_0; scales normal, subnormal, zero, negative and large) for
// block counts on both sides of the AVX-512 kernels' runs of scales, and matmul_rows over 1 to
// 9 activation rows (tiles, then leftover rows through dot4, leftover columns through dot).
// Skipped on CPUs without AVX-512 VNNI (or AVX2).

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu::quant_dots_avx512_test {
namespace {

using test::random_half;

struct Tables {
  const KernelTable* avx2 = nullptr;
  const KernelTable* avx512 = nullptr;
};

Tables tables() {
  Tables t;
  for (const auto& nt : test::simd_tables()) {
    if (nt.table->isa == Isa::Avx2) t.avx2 = nt.table;
    if (nt.table->isa == Isa::Avx512 && t.avx512 == nullptr) t.avx512 = nt.table;
  }
  return t;
}

const DotKernel& kernel(const KernelTable& kt, DType wt) {
  return wt == DType::Q4_0 ? kt.q4_0 : wt == DType::Q4_1 ? kt.q4_1 : kt.q8_0;
}

// `rows` rows of `blocks` blocks of `dtype` with random bits, rows `stride` bytes apart (the
// padding filled with junk). Activation quants stay in [-127, 127], as the encoders write them.
std::vector<uint8_t> random_rows(DType dtype, int rows, int64_t blocks, size_t stride,
                                 std::mt19937_64& rng) {
  std::vector<uint8_t> out(stride * static_cast<size_t>(rows));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  const auto act_quant = [&] { return static_cast<int8_t>(static_cast<int>(rng() % 255) - 127); };
  for (int r = 0; r < rows; ++r) {
    uint8_t* row = out.data() + static_cast<size_t>(r) * stride;
    for (int64_t i = 0; i < blocks; ++i) {
      switch (dtype) {
        case DType::Q4_0: {
          auto* blk = reinterpret_cast<block_q4_0*>(row) + i;
          blk->d = random_half(rng);
          break;
        }
        case DType::Q4_1: {
          auto* blk = reinterpret_cast<block_q4_1*>(row) + i;
          blk->d = random_half(rng);
          blk->m = random_half(rng);
          break;
        }
        case DType::Q8_0: {  // weights: any int8, -128 included
          auto* blk = reinterpret_cast<block_q8_0*>(row) + i;
          blk->d = random_half(rng);
          break;
        }
        case DType::Q8_1: {
          auto* blk = reinterpret_cast<block_q8_1*>(row) + i;
          blk->d = random_half(rng);
          blk->s = random_half(rng);
          for (int8_t& q : blk->qs) q = act_quant();
          break;
        }
        default:
          ADD_FAILURE() << "no random blocks for " << dtype_name(dtype);
      }
    }
  }
  return out;
}

// Activation rows for weight type wt: Q8_0 blocks written with quants in [-127, 127].
std::vector<uint8_t> random_activations(DType wt, int rows, int64_t blocks, size_t stride,
                                        std::mt19937_64& rng) {
  if (wt == DType::Q4_1) return random_rows(DType::Q8_1, rows, blocks, stride, rng);
  std::vector<uint8_t> out(stride * static_cast<size_t>(rows));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  for (int r = 0; r < rows; ++r) {
    auto* blk = reinterpret_cast<block_q8_0*>(out.data() + static_cast<size_t>(r) * stride);
    for (int64_t i = 0; i < blocks; ++i) {
      blk[i].d = random_half(rng);
      for (int8_t& q : blk[i].qs) q = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    }
  }
  return out;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

const DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q8_0};

// Block counts: one, odd ones, and both sides of 32 and 64 (the runs of scales are 32 blocks).
const int64_t kBlocks[] = {1, 2, 3, 5, 17, 18, 31, 32, 33, 48, 63, 64, 65, 97};

TEST(QuantDotsAvx512Test, TileEqualsAvx2Bitwise) {
  const Tables t = tables();
  if (t.avx2 == nullptr || t.avx512 == nullptr) GTEST_SKIP() << "needs AVX2 and AVX-512";
  constexpr int R = kTileActRows;
  constexpr int64_t kOutStride = 7;
  for (DType wt : kTypes) {
    for (int64_t blocks : kBlocks) {
      for (uint64_t seed = 0; seed < 6; ++seed) {
        std::mt19937_64 rng(seed * 1000 + blocks * 10 + static_cast<int>(wt));
        const int64_t n = blocks * kQK;
        const size_t ws = row_bytes(wt, n) + 6;  // padded rows
        const size_t xs = row_bytes(activation_dtype(wt), n) + 10;
        const auto w = random_rows(wt, 4, blocks, ws, rng);
        const auto x = random_activations(wt, R, blocks, xs, rng);
        const float untouched = -3.0f;
        std::vector<float> got(R * kOutStride, untouched), want(R * kOutStride, untouched);
        kernel(*t.avx512, wt).dot4xr(n, w.data(), ws, x.data(), xs, got.data(), kOutStride);
        kernel(*t.avx2, wt).dot4xr(n, w.data(), ws, x.data(), xs, want.data(), kOutStride);
        for (int c = 0; c < R; ++c) {
          for (int r = 0; r < 4; ++r) {
            const float one = kernel(*t.avx2, wt).dot(n, w.data() + r * ws, x.data() + c * xs);
            const float tile = got[c * kOutStride + r];
            EXPECT_TRUE(same_bits(one, tile))
                << dtype_name(wt) << " blocks=" << blocks << " seed " << seed << " (" << c << ","
                << r << "): avx2 dot " << one << " vs avx512 dot4xr " << tile;
          }
        }
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << dtype_name(wt) << " blocks=" << blocks << " seed " << seed
            << ": tiles differ (or an element outside the tile was written)";
      }
    }
  }
}

TEST(QuantDotsAvx512Test, OneAndFourRowFormsEqualAvx2Bitwise) {
  const Tables t = tables();
  if (t.avx2 == nullptr || t.avx512 == nullptr) GTEST_SKIP() << "needs AVX2 and AVX-512";
  for (DType wt : kTypes) {
    for (int64_t blocks : kBlocks) {
      for (uint64_t seed = 0; seed < 6; ++seed) {
        std::mt19937_64 rng(seed * 1000 + blocks * 10 + static_cast<int>(wt) + 7);
        const int64_t n = blocks * kQK;
        const size_t ws = row_bytes(wt, n) + 2;
        const auto w = random_rows(wt, 4, blocks, ws, rng);
        const auto x = random_activations(wt, 1, blocks, row_bytes(activation_dtype(wt), n), rng);
        float four[4];
        kernel(*t.avx512, wt).dot4(n, w.data(), ws, x.data(), four);
        for (int r = 0; r < 4; ++r) {
          const float want = kernel(*t.avx2, wt).dot(n, w.data() + r * ws, x.data());
          const float one = kernel(*t.avx512, wt).dot(n, w.data() + r * ws, x.data());
          EXPECT_TRUE(same_bits(want, four[r]))
              << dtype_name(wt) << " blocks=" << blocks << " seed " << seed << " row " << r
              << ": avx2 " << want << " vs avx512 dot4 " << four[r];
          EXPECT_TRUE(same_bits(want, one))
              << dtype_name(wt) << " blocks=" << blocks << " seed " << seed << " row " << r
              << ": avx2 " << want << " vs avx512 dot " << one;
        }
      }
    }
  }
}

// Weights and activations as the model has them (quantized floats, activations through the
// AVX-512 table's encoder), through matmul_rows with 1 to 9 activation rows and a column range
// off multiples of 4: the same bits as the AVX2 table, and as one row at a time.
TEST(QuantDotsAvx512Test, MatmulRowsEqualAvx2Bitwise) {
  const Tables t = tables();
  if (t.avx2 == nullptr || t.avx512 == nullptr) GTEST_SKIP() << "needs AVX2 and AVX-512";
  const int64_t n = 23, j0 = 1, j1 = 22, max_m = 9;
  for (DType wt : kTypes) {
    for (int64_t k : {32, 96, 544, 576, 1056, 1536, 2080}) {
      const auto wf = test::random_floats(static_cast<size_t>(n * k), k * 3 + 1);
      const auto xf = test::random_floats(static_cast<size_t>(max_m * k), k * 3 + 2, -4.0f, 4.0f);
      const auto w = test::encode_rows(wt, wf, k);
      const size_t ws = row_bytes(wt, k);
      const size_t xs = row_bytes(activation_dtype(wt), k);
      std::vector<uint8_t> xq(xs * max_m);
      convert_rows(*t.avx512, wt, xf.data(), k, k, 0, max_m, xq.data());
      for (int64_t m = 1; m <= max_m; ++m) {
        const float untouched = -5.0f;
        std::vector<float> got(m * n, untouched), want(m * n, untouched), rows(m * n, untouched);
        matmul_rows(*t.avx512, wt, w.data(), ws, xq.data(), xs, m, k, j0, j1, got.data(), n);
        matmul_rows(*t.avx2, wt, w.data(), ws, xq.data(), xs, m, k, j0, j1, want.data(), n);
        for (int64_t i = 0; i < m; ++i) {
          matmul_rows(*t.avx512, wt, w.data(), ws, xq.data() + i * xs, xs, 1, k, j0, j1,
                      rows.data() + i * n, n);
        }
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << dtype_name(wt) << " k=" << k << " m=" << m << ": avx512 vs avx2";
        EXPECT_EQ(std::memcmp(got.data(), rows.data(), got.size() * sizeof(float)), 0)
            << dtype_name(wt) << " k=" << k << " m=" << m << ": tiled vs one row at a time";
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu::quant_dots_avx512_test
