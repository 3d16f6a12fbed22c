// KV row encoding (kernels/cpu/kv_codec.h): FP8 E4M3 conversions exhaustively, the error
// bounds and write-order rules of each KV dtype, and q4c's per-channel tiles.

#include "kernels/cpu/kv_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/kv_codec_avx512.h"

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
          case KVDType::Q4C:  // not written by rows (KVCodecQ4C below)
            break;
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

// ---- q4c: per-channel tiles (kv_write_tile) ----------------------------------------------

float f16_at(const std::vector<uint8_t>& scales, size_t i) {
  uint16_t h;
  std::memcpy(&h, scales.data() + 2 * i, 2);
  return fp16_to_f32(h);
}

int code_at(const std::vector<uint8_t>& tile, int32_t hd, int32_t r, int32_t c) {
  return (tile[static_cast<size_t>(r) * (hd / 2) + c / 2] >> (4 * (c & 1))) & 0xf;
}

// Keys as they look: per channel an offset (a few large ones) and a spread of its own.
std::vector<float> key_like_rows(int32_t rows, int32_t hd, uint64_t seed) {
  std::vector<float> x = random_floats(size_t(rows) * hd, seed, -1.0f, 1.0f);
  for (int32_t c = 0; c < hd; ++c) {
    const float offset = c % 13 == 5 ? 12.0f - c : 0.1f * static_cast<float>(c % 7);
    const float spread = 0.05f + static_cast<float>(c % 5);
    for (int32_t r = 0; r < rows; ++r)
      x[size_t(r) * hd + c] = offset + spread * x[size_t(r) * hd + c];
  }
  return x;
}

// The stored scales are f16 of (max - min) / 15 and of min per channel; every code is the
// rounded (x - m) / d, clamped; the decode is m + q * d exactly; the error is half a step
// (plus what rounding d and m to f16 moved the ends by).
// The AVX-512 q4 scale search (what the encoder uses where the CPU has it) chooses bitwise
// what the scalar reference chooses: groups of every scale from subnormal to huge, with
// outliers, ties (all values equal), a lone non-zero value, and extremes so small that
// 1 / d overflows.
TEST(KVCodec, Q4ScaleSearchEqualsTheReferenceBitwise) {
  if (!cpu_features().avx512f) GTEST_SKIP() << "no AVX-512: the encoder uses the reference";
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int trial = 0; trial < 4000; ++trial) {
    float x[32];
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 260) - 140);
    for (float& v : x) v = unit(rng) * scale;
    switch (trial % 5) {
      case 1:
        x[rng() % 32] *= 40.0f;  // an outlier
        break;
      case 2:
        for (float& v : x) v = x[0];  // every candidate's error ties in structure
        break;
      case 3:
        for (int i = 1; i < 32; ++i) x[i] = 0.0f;  // a lone value
        break;
      default:
        break;
    }
    float extreme = 0.0f;
    for (float v : x) {
      if (std::fabs(v) > std::fabs(extreme)) extreme = v;
    }
    const float want = q4_group_scale_reference(x, extreme);
    const float got = avx512::q4_group_scale(x, extreme);
    ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
        << "trial " << trial << ": " << got << " vs " << want << " (scale " << scale << ")";
  }
}

TEST(KVCodecQ4C, TileCodesMatchTheirDefinition) {
  for (const auto& [rows, hd] : {std::pair{16, 64}, std::pair{16, 128}, std::pair{1, 8},
                                 std::pair{32, 96}, std::pair{5, 40}}) {
    const auto x = key_like_rows(rows, hd, 7 + hd);
    std::vector<uint8_t> tile(kv_row_bytes(KVDType::Q4C, hd) * rows);
    std::vector<uint8_t> scales(kv_tile_scale_bytes(KVDType::Q4C, rows, hd));
    kv_write_tile(KVDType::Q4C, x.data(), rows, hd, tile.data(), scales.data());
    std::vector<float> got(hd);
    for (int32_t c = 0; c < hd; ++c) {
      float lo = INFINITY;
      float hi = -INFINITY;
      for (int32_t r = 0; r < rows; ++r) {
        lo = std::min(lo, x[size_t(r) * hd + c]);
        hi = std::max(hi, x[size_t(r) * hd + c]);
      }
      const float d = f16_at(scales, c);
      const float m = f16_at(scales, hd + c);
      ASSERT_EQ(d, fp16_to_f32(f32_to_fp16((hi - lo) / 15.0f))) << "channel " << c;
      ASSERT_EQ(m, fp16_to_f32(f32_to_fp16(lo))) << "channel " << c;
      for (int32_t r = 0; r < rows; ++r) {
        const float want_q =
            d == 0.0f ? 0.0f
                      : std::clamp(std::nearbyint((x[size_t(r) * hd + c] - m) / d), 0.0f, 15.0f);
        ASSERT_EQ(code_at(tile, hd, r, c), static_cast<int>(want_q)) << r << " " << c;
      }
    }
    for (int32_t r = 0; r < rows; ++r) {
      kv_decode_row(KVDType::Q4C, tile.data(), scales.data(), hd, r, got.data());
      for (int32_t c = 0; c < hd; ++c) {
        const float d = f16_at(scales, c);
        const float m = f16_at(scales, hd + c);
        const float want = m + static_cast<float>(code_at(tile, hd, r, c)) * d;
        ASSERT_EQ(got[c], want) << "row " << r << " channel " << c;
        // Half a step, plus how far the f16 rounding of d and m moved the grid's ends.
        float lo = INFINITY;
        for (int32_t i = 0; i < rows; ++i) lo = std::min(lo, x[size_t(i) * hd + c]);
        float hi = -INFINITY;
        for (int32_t i = 0; i < rows; ++i) hi = std::max(hi, x[size_t(i) * hd + c]);
        const float bound = d / 2 + std::fabs(m - lo) + 15 * std::fabs(d - (hi - lo) / 15) +
                            (std::fabs(want) + d) * 0x1p-20f;
        ASSERT_LE(std::fabs(got[c] - x[size_t(r) * hd + c]), bound) << r << " " << c;
      }
    }
  }
}

// Uniform values in a channel: the error is within half a step (the f16 terms above are
// small beside it here), so the bound is what the format promises.
TEST(KVCodecQ4C, ErrorIsHalfAStep) {
  constexpr int32_t kRows = 16;
  constexpr int32_t kHd = 64;
  const auto x = random_floats(size_t(kRows) * kHd, 3, -2.0f, 2.0f);
  std::vector<uint8_t> tile(kRows * kHd / 2);
  std::vector<uint8_t> scales(4 * kHd);
  kv_write_tile(KVDType::Q4C, x.data(), kRows, kHd, tile.data(), scales.data());
  std::vector<float> got(kHd);
  double worst = 0.0;
  for (int32_t r = 0; r < kRows; ++r) {
    kv_decode_row(KVDType::Q4C, tile.data(), scales.data(), kHd, r, got.data());
    for (int32_t c = 0; c < kHd; ++c) {
      const double step = f16_at(scales, c);
      const double err = std::fabs(got[c] - x[r * kHd + c]) / step;
      worst = std::max(worst, err);
    }
  }
  EXPECT_LE(worst, 0.5 * 1.01);
}

// A channel with a huge, nearly constant offset (keys' outlier channels) leaves every other
// channel's scales and codes exactly as they are without it; a constant channel decodes
// exactly (no step: q = 0, x = m).
TEST(KVCodecQ4C, ChannelsAreCodedApart) {
  constexpr int32_t kRows = 16;
  constexpr int32_t kHd = 64;
  const auto plain = random_floats(size_t(kRows) * kHd, 11, -1.0f, 1.0f);
  auto outlier = plain;
  for (int32_t r = 0; r < kRows; ++r) {
    outlier[r * kHd + 9] = 900.0f + plain[r * kHd + 9];  // huge offset, small spread
    outlier[r * kHd + 20] = 3.25f;                       // constant, exact in f16
    outlier[r * kHd + 21] = -0.1f;                       // constant, not exact in f16
  }
  std::vector<uint8_t> tile_a(kRows * kHd / 2), tile_b(kRows * kHd / 2);
  std::vector<uint8_t> scales_a(4 * kHd), scales_b(4 * kHd);
  kv_write_tile(KVDType::Q4C, plain.data(), kRows, kHd, tile_a.data(), scales_a.data());
  kv_write_tile(KVDType::Q4C, outlier.data(), kRows, kHd, tile_b.data(), scales_b.data());
  for (int32_t c = 0; c < kHd; ++c) {
    if (c == 9 || c == 20 || c == 21) continue;
    EXPECT_EQ(f16_at(scales_a, c), f16_at(scales_b, c)) << c;
    EXPECT_EQ(f16_at(scales_a, kHd + c), f16_at(scales_b, kHd + c)) << c;
    for (int32_t r = 0; r < kRows; ++r) {
      EXPECT_EQ(code_at(tile_a, kHd, r, c), code_at(tile_b, kHd, r, c)) << r << " " << c;
    }
  }
  std::vector<float> got(kHd);
  for (int32_t r = 0; r < kRows; ++r) {
    kv_decode_row(KVDType::Q4C, tile_b.data(), scales_b.data(), kHd, r, got.data());
    EXPECT_EQ(got[20], 3.25f);
    EXPECT_EQ(got[21], fp16_to_f32(f32_to_fp16(-0.1f)));
    // The outlier channel has its own step: (spread 2) / 15, plus f16's half ulp at 900.
    EXPECT_NEAR(got[9], outlier[r * kHd + 9], 2.0f / 15 / 2 + 0.25f + 0.01f);
  }
}

// Writing a tile of n rows touches rows [0, n) and the 4 * head_dim scale bytes only.
TEST(KVCodecQ4C, WritesOnlyItsRows) {
  constexpr int32_t kBlock = 16;
  constexpr int32_t kHd = 32;
  const auto x = key_like_rows(7, kHd, 5);
  std::vector<uint8_t> tile(kBlock * kHd / 2, 0xee);
  std::vector<uint8_t> scales(4 * kHd + 8, 0xee);
  kv_write_tile(KVDType::Q4C, x.data(), 7, kHd, tile.data(), scales.data());
  for (size_t i = 7 * kHd / 2; i < tile.size(); ++i) ASSERT_EQ(tile[i], 0xee) << i;
  for (size_t i = 4 * kHd; i < scales.size(); ++i) ASSERT_EQ(scales[i], 0xee) << i;
  EXPECT_EQ(kv_tile_scale_bytes(KVDType::Q4C, 1, kHd), kv_tile_scale_bytes(KVDType::Q4C, 64, kHd));
}

// For the row-written dtypes a tile is its rows written one by one, and rows past n_rows are
// left alone.
TEST(KVCodecQ4C, TileOfRowDtypesIsItsRows) {
  constexpr int32_t kHd = 64;
  const auto x = random_floats(size_t(9) * kHd, 21, -3.0f, 3.0f);
  for (KVDType dtype :
       {KVDType::F16, KVDType::BF16, KVDType::F32, KVDType::Int8, KVDType::Fp8, KVDType::Q4}) {
    const size_t rb = kv_row_bytes(dtype, kHd);
    const size_t sb = kv_tile_scale_bytes(dtype, 16, kHd);
    std::vector<uint8_t> tile_a(rb * 16, 0x5a), tile_b(rb * 16, 0x5a);
    std::vector<uint8_t> scales_a(sb + 1, 0x5a), scales_b(sb + 1, 0x5a);
    kv_write_tile(dtype, x.data(), 9, kHd, tile_a.data(), scales_a.data());
    for (int32_t r = 0; r < 9; ++r) {
      kv_write_row(dtype, x.data() + r * kHd, kHd, tile_b.data(), scales_b.data(), r);
    }
    EXPECT_EQ(tile_a, tile_b) << kv_dtype_name(dtype);
    EXPECT_EQ(scales_a, scales_b) << kv_dtype_name(dtype);
    for (size_t i = rb * 9; i < tile_a.size(); ++i) ASSERT_EQ(tile_a[i], 0x5a);
  }
}

// kv_write_row cannot write a q4c row (its scales span the block): it asserts, and in a
// release build writes nothing.
TEST(KVCodecQ4C, RowWritesAreRefused) {
  std::vector<uint8_t> tile(16 * 32, 0x77);
  std::vector<uint8_t> scales(128, 0x77);
  const auto x = random_floats(64, 1);
  EXPECT_DEBUG_DEATH(kv_write_row(KVDType::Q4C, x.data(), 64, tile.data(), scales.data(), 3),
                     "kv_write_tile");
  for (uint8_t b : tile) ASSERT_EQ(b, 0x77);
  for (uint8_t b : scales) ASSERT_EQ(b, 0x77);
}

}  // namespace
}  // namespace tokamak::cpu
