// KV row encoding (kernels/cpu/kv_codec.h): FP8 E4M3 conversions exhaustively, and the error
// bounds and write-order rules of each KV dtype.

#include "kernels/cpu/kv_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"

namespace tokamak::cpu {
namespace {

using test::random_floats;

TEST(Fp8E4M3, KnownValues) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);          // exponent 7 = 2^0
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);        // the largest finite
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), 0.001953125f);  // 2^-9, the smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), 0.015625f);     // 2^-6, the smallest normal
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_fp8_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);        // tie between 1 and 1.125: even (1)
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);        // tie between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(f32_to_fp8_e4m3(0.0009765625f), 0x00);  // 2^-10: tie to 0
  EXPECT_EQ(f32_to_fp8_e4m3(0.0029296875f), 0x02);  // 1.5 * 2^-9: tie to 2 * 2^-9
}

// Every finite code decodes and encodes back to itself (negative zero aside).
TEST(Fp8E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(f32_to_fp8_e4m3(f), c == 0x80 ? 0x80 : c) << c << " " << f;
  }
}

// Encoding picks the nearest code: no other code is closer.
TEST(Fp8E4M3, EncodesToTheNearestCode) {
  const auto x = random_floats(20000, 3, -500.0f, 500.0f);
  const auto small = random_floats(5000, 4, -0.05f, 0.05f);
  for (const auto* v : {&x, &small}) {
    for (float f : *v) {
      const float got = fp8_e4m3_to_f32(f32_to_fp8_e4m3(f));
      const float err = std::fabs(got - std::fmin(std::fmax(f, -448.0f), 448.0f));
      for (int c = 0; c < 256; ++c) {
        if ((c & 0x7f) == 0x7f) continue;
        const float other = std::fabs(fp8_e4m3_to_f32(static_cast<uint8_t>(c)) -
                                      std::fmin(std::fmax(f, -448.0f), 448.0f));
        ASSERT_LE(err, other) << f << " encoded to " << got;
      }
    }
  }
}

struct TileCase {
  KVDType dtype;
  int32_t head_dim;
  int32_t rows;
};

// Random rows of very different magnitudes, each decoded right after the others were
// written: the error stays within the dtype's step, and no row's bytes depend on another's.
TEST(KVCodec, RowsDecodeCloseToTheirInput) {
  for (const TileCase& c : {TileCase{KVDType::F16, 64, 16}, TileCase{KVDType::BF16, 64, 16},
                            TileCase{KVDType::F32, 40, 7}, TileCase{KVDType::Int8, 64, 16},
                            TileCase{KVDType::Int8, 128, 32}, TileCase{KVDType::Fp8, 64, 16},
                            TileCase{KVDType::Q4, 64, 16}, TileCase{KVDType::Q4, 32, 5}}) {
    std::vector<std::vector<float>> x;
    for (int32_t r = 0; r < c.rows; ++r) {
      const float range = 0.01f * std::pow(3.0f, static_cast<float>((r * 7) % 11));
      x.push_back(random_floats(static_cast<size_t>(c.head_dim), 100 + r, -range, range));
    }
    const size_t row_bytes = kv_row_bytes(c.dtype, c.head_dim);
    std::vector<uint8_t> tile(row_bytes * c.rows, 0xee);
    std::vector<uint8_t> scales(kv_tile_scale_bytes(c.dtype, c.rows, c.head_dim) + 1, 0xee);
    for (int32_t r = 0; r < c.rows; ++r) {
      kv_write_row(c.dtype, x[r].data(), c.head_dim, tile.data(), scales.data(), r);
    }
    // Row 0 written again alone, into a fresh tile: the same bytes.
    std::vector<uint8_t> alone_tile(tile.size(), 0);
    std::vector<uint8_t> alone_scales(scales.size(), 0);
    kv_write_row(c.dtype, x[0].data(), c.head_dim, alone_tile.data(), alone_scales.data(), 0);
    EXPECT_EQ(std::memcmp(alone_tile.data(), tile.data(), row_bytes), 0);

    std::vector<float> got(c.head_dim);
    for (int32_t r = 0; r < c.rows; ++r) {
      float row_max = 0.0f;
      for (float f : x[r]) row_max = std::fmax(row_max, std::fabs(f));
      kv_decode_row(c.dtype, tile.data(), scales.data(), c.head_dim, r, got.data());
      for (int32_t i = 0; i < c.head_dim; ++i) {
        const float want = x[r][i];
        float bound = 0.0f;
        switch (c.dtype) {
          case KVDType::F32:
            bound = 0.0f;
            break;
          case KVDType::F16:
            bound = std::fabs(want) * 0x1p-11f + 0x1p-25f;
            break;
          case KVDType::BF16:
            bound = std::fabs(want) * 0x1p-8f;
            break;
          case KVDType::Int8:  // half a step, the step an F16-rounded max / 127
            bound = row_max / 127.0f * 0.5f * 1.01f;
            break;
          case KVDType::Fp8:  // 3 mantissa bits; subnormals below 2^-6 of the scaled range
            bound = std::fabs(want) * 0x1p-4f * 1.01f + row_max / 448.0f * 0x1p-10f;
            break;
          case KVDType::Q4: {  // coded rotated: an element's error is at most the group's
                               // error norm, at most that of the absmax scale (a step each,
                               // the step at most the group's norm / 8), d in F16
            double norm = 0.0;
            const int32_t g0 = i / kKVQ4Group * kKVQ4Group;
            for (int32_t j = g0; j < g0 + kKVQ4Group; ++j) norm += double{x[r][j]} * x[r][j];
            bound = static_cast<float>(std::sqrt(norm) / 8.0 * std::sqrt(32.0) * 1.02);
            break;
          }
        }
        ASSERT_LE(std::fabs(got[i] - want), bound)
            << kv_dtype_name(c.dtype) << " row " << r << " element " << i;
      }
    }
  }
}

// A row of zeros stores zeros (no division by a zero scale).
TEST(KVCodec, ZeroRowsStayZero) {
  for (KVDType dtype : {KVDType::Int8, KVDType::Fp8, KVDType::Q4}) {
    std::vector<uint8_t> tile(64 * 2, 0x55);
    std::vector<uint8_t> scales(64, 0x55);
    const std::vector<float> zeros(64, 0.0f);
    kv_write_row(dtype, zeros.data(), 64, tile.data(), scales.data(), 1);
    std::vector<float> got(64);
    kv_decode_row(dtype, tile.data(), scales.data(), 64, 1, got.data());
    for (float g : got) EXPECT_EQ(g, 0.0f) << kv_dtype_name(dtype);
  }
}

// The rotation q4 rows are stored in: orthonormal (norms kept) and its own inverse.
TEST(KVCodec, Hadamard32IsOrthonormalAndItsOwnInverse) {
  auto x = random_floats(32, 9, -3.0f, 3.0f);
  const auto original = x;
  double norm = 0.0;
  for (float f : x) norm += double{f} * f;
  hadamard32(x.data());
  double rotated_norm = 0.0;
  for (float f : x) rotated_norm += double{f} * f;
  EXPECT_NEAR(rotated_norm, norm, 1e-4 * norm);
  EXPECT_NE(x, original);
  hadamard32(x.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(x[i], original[i], 1e-5f);
}

// One outlier channel in a group (as keys have): the rotation spreads it, so the other 31
// values keep most of their precision instead of rounding to zero against its scale.
TEST(KVCodec, Q4KeepsSmallValuesBesideAnOutlier) {
  auto x = random_floats(32, 10, -1.0f, 1.0f);
  x[7] = 40.0f;
  std::vector<uint8_t> tile(16);
  std::vector<uint8_t> scales(2);
  kv_write_row(KVDType::Q4, x.data(), 32, tile.data(), scales.data(), 0);
  std::vector<float> got(32);
  kv_decode_row(KVDType::Q4, tile.data(), scales.data(), 32, 0, got.data());
  double err = 0.0;
  for (int i = 0; i < 32; ++i) err += (got[i] - x[i]) * (got[i] - x[i]);
  // Unrotated, the step would be 40 / 8 = 5 and every small value would code to 0 (an RMS
  // error of ~0.58 for values uniform in [-1, 1]).
  EXPECT_LT(std::sqrt(err / 32), 0.58 * 0.9);
  EXPECT_NEAR(got[7], 40.0f, 2.0f);
}

}  // namespace
}  // namespace tokamak::cpu
