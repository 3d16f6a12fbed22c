#include "kernels/cpu/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"

namespace tokamak::cpu {
namespace {

using test::random_floats;

TEST(QuantizeTest, BlockSizesMatchDtypeTable) {
  EXPECT_EQ(sizeof(block_q4_0), dtype_info(DType::Q4_0).type_size);
  EXPECT_EQ(sizeof(block_q4_1), dtype_info(DType::Q4_1).type_size);
  EXPECT_EQ(sizeof(block_q8_0), dtype_info(DType::Q8_0).type_size);
  EXPECT_EQ(sizeof(block_q8_1), dtype_info(DType::Q8_1).type_size);
  EXPECT_EQ(sizeof(block_q5_0), dtype_info(DType::Q5_0).type_size);
  EXPECT_EQ(sizeof(block_q5_1), dtype_info(DType::Q5_1).type_size);
  EXPECT_EQ(sizeof(block_q4_K), dtype_info(DType::Q4_K).type_size);
  EXPECT_EQ(sizeof(block_q5_K), dtype_info(DType::Q5_K).type_size);
  EXPECT_EQ(sizeof(block_q6_K), dtype_info(DType::Q6_K).type_size);
  EXPECT_EQ(sizeof(block_q8_K), dtype_info(DType::Q8_K).type_size);
}

// Q4_K / Q5_K sub-block scales and mins, written bit by bit as the format lays them out: bytes
// 0-3 hold scales 0-3 in their low six bits and the top two bits of scales 4-7; bytes 4-7 the
// same for the mins; bytes 8-11 the low nibbles of scale 4-7 (low) and min 4-7 (high).
TEST(QuantizeTest, KQuantScaleMinPacking) {
  const int sc[8] = {1, 62, 33, 0, 63, 17, 48, 31};
  const int m[8] = {5, 0, 63, 40, 22, 63, 1, 36};
  uint8_t bytes[kKScaleBytes] = {};
  for (int s = 0; s < 4; ++s) {
    bytes[s] = static_cast<uint8_t>(sc[s] | (sc[s + 4] >> 4) << 6);
    bytes[s + 4] = static_cast<uint8_t>(m[s] | (m[s + 4] >> 4) << 6);
    bytes[s + 8] = static_cast<uint8_t>((sc[s + 4] & 15) | (m[s + 4] & 15) << 4);
  }
  for (int s = 0; s < 8; ++s) {
    int got_sc = -1;
    int got_m = -1;
    kq_scale_min(bytes, s, got_sc, got_m);
    EXPECT_EQ(got_sc, sc[s]) << "scale " << s;
    EXPECT_EQ(got_m, m[s]) << "min " << s;
  }
}

// A Q6_K super-block decoded by hand: element 128h + 32g + l takes its low nibble from
// ql[64h + 32(g % 2) + l] (high nibble for g >= 2), its top two bits from qh[32h + l] at 2g.
TEST(QuantizeTest, Q6_KHandDecodedElements) {
  block_q6_K b{};
  b.d = f32_to_fp16(0.5f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s - 8);
  b.ql[64 + 32 + 3] = 0x5a;      // h = 1, l = 3: g = 1 (low nibble 0xa), g = 3 (high nibble 0x5)
  b.qh[32 + 3] = 0b10'00'01'00;  // h = 1, l = 3: g = 1 -> 1, g = 3 -> 2
  std::vector<float> y(kQK_K);
  dequantize_row_q6_K(&b, y.data(), kQK_K);
  const int e1 = 128 + 32 + 3;  // g = 1: q = 0xa | 1 << 4 = 26
  const int e3 = 128 + 96 + 3;  // g = 3: q = 0x5 | 2 << 4 = 37
  EXPECT_EQ(y[e1], 0.5f * static_cast<float>(e1 / 16 - 8) * (26 - 32));
  EXPECT_EQ(y[e3], 0.5f * static_cast<float>(e3 / 16 - 8) * (37 - 32));
  EXPECT_EQ(y[0], 0.5f * -8.0f * -32.0f);  // all-zero codes: q - 32 = -32
}

TEST(QuantizeTest, Q8_0ReferenceRoundsHalfAwayFromZero) {
  // amax = 127 gives d = 1 and id = 1, so q = round(x).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 0.5f;
  x[2] = 1.5f;
  x[3] = -0.5f;
  x[4] = 2.5f;
  x[5] = -126.6f;
  x[6] = 3.49f;
  block_q8_0 b;
  quantize_row_q8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // 1.0
  const int expected[] = {127, 1, 2, -1, 3, -127, 3, 0};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], expected[j]) << j;

  std::vector<float> y(32);
  dequantize_row_q8_0(&b, y.data(), 32);
  EXPECT_EQ(y[0], 127.0f);
  EXPECT_EQ(y[3], -1.0f);
}

TEST(QuantizeTest, Q8ActivationRoundsHalfToEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 0.5f;
  x[2] = 1.5f;
  x[3] = -0.5f;
  x[4] = 2.5f;
  x[5] = -126.6f;
  block_q8_0 b;
  quantize_row_q8_0_act(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  const int expected[] = {127, 0, 2, 0, 2, -127};
  for (int j = 0; j < 6; ++j) EXPECT_EQ(b.qs[j], expected[j]) << j;

  block_q8_1 c;
  quantize_row_q8_1_act(x.data(), &c, 32);
  EXPECT_EQ(c.d, 0x3c00);
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(c.qs[j], b.qs[j]);
    sum += c.qs[j];
  }
  EXPECT_EQ(c.s, f32_to_fp16(static_cast<float>(sum)));  // s = d * sum(q), d = 1
}

TEST(QuantizeTest, Q8_1StoresScaledSumOfQuants) {
  const auto x = random_floats(64, 5, -3.0f, 3.0f);
  block_q8_1 b[2];
  quantize_row_q8_1(x.data(), b, 64);
  for (const auto& blk : b) {
    float amax = 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += blk.qs[j];
    (void)amax;
    const float d = fp16_to_f32(blk.d);
    EXPECT_NEAR(fp16_to_f32(blk.s), d * static_cast<float>(sum),
                std::fabs(d * static_cast<float>(sum)) * 1e-3f + 1e-6f);
  }
}

TEST(QuantizeTest, Q4_0HandComputedBlock) {
  // Largest magnitude is -8 (negative): d = -8 / -8 = 1, q = min(15, trunc(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // 0
  x[1] = 7.0f;    // 15
  x[2] = 0.4f;    // 8
  x[3] = 0.5f;    // 9
  x[4] = -0.5f;   // 8
  x[16] = 3.0f;   // 11 (high nibble of byte 0)
  x[17] = -2.6f;  // 5 (trunc(5.9))
  block_q4_0 b;
  quantize_row_q4_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], 0 | (11 << 4));
  EXPECT_EQ(b.qs[1], 15 | (5 << 4));
  EXPECT_EQ(b.qs[2], 8 | (8 << 4));
  EXPECT_EQ(b.qs[3], 9 | (8 << 4));
  EXPECT_EQ(b.qs[4], 8 | (8 << 4));

  // Largest magnitude positive: d = -1, so x = 8 maps to 0 and x = -8 clamps from 16 to 15.
  std::vector<float> z(32, 0.0f);
  z[0] = 8.0f;
  z[1] = -8.0f;
  quantize_row_q4_0(z.data(), &b, 32);
  EXPECT_EQ(b.d, 0xbc00);  // -1.0
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  std::vector<float> y(32);
  dequantize_row_q4_0(&b, y.data(), 32);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], -7.0f);
  EXPECT_EQ(y[2], 0.0f);
}

TEST(QuantizeTest, Q4_1HandComputedBlock) {
  // Values 1 + 0.5 * (j % 16): min 1, max 8.5, d = 0.5, q = j % 16.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 1.0f + 0.5f * static_cast<float>(j % 16);
  block_q4_1 b;
  quantize_row_q4_1(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3800);  // 0.5
  EXPECT_EQ(b.m, 0x3c00);  // 1.0
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | (j << 4)) << j;
  std::vector<float> y(32);
  dequantize_row_q4_1(&b, y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

TEST(QuantizeTest, HalfTypesHandComputed) {
  const float x[] = {1.0f, -2.0f, 0.5f, 65504.0f, 1e-8f};
  uint16_t h[5];
  quantize_row_f16(x, h, 5);
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0xc000);
  EXPECT_EQ(h[2], 0x3800);
  EXPECT_EQ(h[3], 0x7bff);
  EXPECT_EQ(h[4], 0x0000);
  uint16_t b[5];
  quantize_row_bf16(x, b, 5);
  EXPECT_EQ(b[0], 0x3f80);
  EXPECT_EQ(b[1], 0xc000);
  EXPECT_EQ(b[2], 0x3f00);
}

TEST(QuantizeTest, AllZeroBlocksEncodeToZero) {
  std::vector<float> x(256, 0.0f);
  for (DType d : {DType::Q8_0, DType::Q8_1, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    std::vector<uint8_t> buf(row_bytes(d, 256));
    quantize_row(d, x.data(), buf.data(), 256);
    std::vector<float> y(256, 1.0f);
    dequantize_row(d, buf.data(), y.data(), 256);
    for (float v : y) EXPECT_EQ(v, 0.0f) << dtype_name(d);
  }
}

// Round trip: each element within a fraction of its block's step.
TEST(QuantizeTest, RoundTripErrorBounds) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const float scale = std::pow(10.0f, static_cast<float>(seed % 5) - 2.0f);
    const auto x = random_floats(32 * 8, seed, -scale, scale);
    for (DType d : {DType::F16, DType::BF16, DType::Q8_0, DType::Q8_1, DType::Q4_0, DType::Q4_1}) {
      std::vector<uint8_t> buf(row_bytes(d, 256));
      quantize_row(d, x.data(), buf.data(), 256);
      std::vector<float> y(256);
      dequantize_row(d, buf.data(), y.data(), 256);
      for (int b = 0; b < 8; ++b) {
        float amax = 0.0f, mn = x[b * 32], mx = x[b * 32];
        for (int j = 0; j < 32; ++j) {
          amax = std::max(amax, std::fabs(x[b * 32 + j]));
          mn = std::min(mn, x[b * 32 + j]);
          mx = std::max(mx, x[b * 32 + j]);
        }
        for (int j = 0; j < 32; ++j) {
          const float v = x[b * 32 + j];
          const float err = std::fabs(y[b * 32 + j] - v);
          float bound = 0.0f;
          switch (d) {
            case DType::F16:
              bound = std::fabs(v) * 0x1p-11f + 6e-8f;
              break;
            case DType::BF16:
              bound = std::fabs(v) * 0x1p-8f;
              break;
            case DType::Q8_0:
            case DType::Q8_1:
              bound = amax / 127.0f * 0.57f;
              break;
            case DType::Q4_0:
              bound = amax / 8.0f * 1.01f + amax * 0x1p-10f;  // -amax may clamp
              break;
            case DType::Q4_1:
              bound = (mx - mn) / 15.0f * 0.51f + (std::fabs(mn) + (mx - mn)) * 0x1p-10f;
              break;
            default:
              break;
          }
          EXPECT_LE(err, bound) << dtype_name(d) << " seed " << seed << " elem " << b * 32 + j;
        }
      }
    }
  }
}

// The activation encoders differ from the reference only where x * id is a tie or where
// 127/amax and 1/(amax/127) round differently: at most one quant step, same scale.
TEST(QuantizeTest, ActivationEncoderCloseToReference) {
  const auto x = random_floats(32 * 64, 9, -4.0f, 4.0f);
  std::vector<block_q8_0> ref(64), act(64);
  quantize_row_q8_0(x.data(), ref.data(), 32 * 64);
  quantize_row_q8_0_act(x.data(), act.data(), 32 * 64);
  int differ = 0;
  for (int b = 0; b < 64; ++b) {
    EXPECT_EQ(ref[b].d, act[b].d);
    for (int j = 0; j < 32; ++j) {
      EXPECT_LE(std::abs(ref[b].qs[j] - act[b].qs[j]), 1);
      differ += ref[b].qs[j] != act[b].qs[j];
    }
  }
  EXPECT_LT(differ, 32);
}

// The 5-bit and K-quant encoders: no element far off, and the error's RMS against the signal's
// within ~1.3x of uniform rounding at the type's step (step / sqrt(12) against range / sqrt(3):
// 0.031 for Q5_0, Q5_1 and Q5_K, 0.067 for Q4_K, 0.016 for Q6_K; measured 0.029-0.032,
// 0.061-0.063 and 0.014-0.015).
TEST(QuantizeTest, FiveBitAndKQuantRoundTrip) {
  struct Bound {
    DType d;
    float rms;  // most RMS error / RMS signal, uniform inputs
  };
  for (const Bound& b :
       {Bound{DType::Q5_0, 0.04f}, Bound{DType::Q5_1, 0.04f}, Bound{DType::Q4_K, 0.08f},
        Bound{DType::Q5_K, 0.04f}, Bound{DType::Q6_K, 0.02f}}) {
    for (uint64_t seed = 0; seed < 10; ++seed) {
      const float scale = std::pow(10.0f, static_cast<float>(seed % 5) - 2.0f);
      const int64_t n = 1024;
      auto x = random_floats(n, seed + 50, -scale, scale);
      if (seed % 2 == 1) {
        for (float& v : x) v = v * 0.5f + 0.5f * scale;  // all positive: the mins at 0
      }
      std::vector<uint8_t> buf(row_bytes(b.d, n));
      quantize_row(b.d, x.data(), buf.data(), n);
      std::vector<float> y(n);
      dequantize_row(b.d, buf.data(), y.data(), n);
      double err2 = 0.0;
      double sig2 = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        err2 += (y[i] - x[i]) * static_cast<double>(y[i] - x[i]);
        sig2 += x[i] * static_cast<double>(x[i]);
        // No element further than a sixth of the input's range (a clamped code or a wrong
        // position in the block would be).
        EXPECT_LE(std::fabs(y[i] - x[i]), scale / 6.0f) << dtype_name(b.d) << " elem " << i;
      }
      EXPECT_LE(std::sqrt(err2 / sig2), b.rms) << dtype_name(b.d) << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu
