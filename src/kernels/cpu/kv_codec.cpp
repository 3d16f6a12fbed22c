#include "kernels/cpu/kv_codec.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "kernels/cpu/kv_codec_avx512.h"

namespace tokamak::cpu {
namespace {

constexpr float kInt8Max = 127.0f;

float max_abs(const float* x, int32_t n) {
  float m = 0.0f;
  for (int32_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

int8_t to_int8(float v) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(v), -kInt8Max, kInt8Max));
}

// The row's f16 scale d, stored; returns d as the decoder will see it (rounded to f16), so
// the elements are encoded against the scale that decodes them.
float store_scale(float d, uint16_t* out) {
  const uint16_t h = f32_to_fp16(d);
  std::memcpy(out, &h, sizeof h);
  return fp16_to_f32(h);
}

float load_scale(const uint16_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return fp16_to_f32(h);
}

// int8 / fp8: d = max |x| / range, q = x / d.
void write_scaled_row(KVDType dtype, const float* x, int32_t n, uint8_t* q, uint16_t* scale) {
  const float range = dtype == KVDType::Int8 ? kInt8Max : kFp8Max;
  const float d = store_scale(max_abs(x, n) / range, scale);
  const float inv = d > 0.0f ? 1.0f / d : 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    const float v = x[i] * inv;
    q[i] = dtype == KVDType::Int8 ? static_cast<uint8_t>(to_int8(v)) : f32_to_fp8_e4m3(v);
  }
}

// Squared error of the group coded with scale d (codes clamped to [-8, 7]).
float q4_error(const float* x, float d) {
  const float inv = 1.0f / d;
  float err = 0.0f;
  for (int32_t i = 0; i < kKVQ4Group; ++i) {
    const float q = std::clamp(std::nearbyint(x[i] * inv), -8.0f, 7.0f);
    const float e = x[i] - q * d;
    err += e * e;
  }
  return err;
}

}  // namespace

// The group's scale: of absmax / 8 shrunk by 0 to 35% (clipping the largest values buys
// finer steps for the rest), on either side of zero, the one with the least squared error.
float q4_group_scale_reference(const float* x, float extreme) {
  if (extreme == 0.0f) return 0.0f;
  float best = extreme / -8.0f;
  float best_err = q4_error(x, best);
  for (int32_t k = 0; k <= 14; ++k) {
    const float shrink = 1.0f - 0.025f * static_cast<float>(k);
    for (const float d : {extreme / -8.0f * shrink, extreme / 7.0f * shrink}) {
      const float e = q4_error(x, d);
      if (e < best_err) {
        best_err = e;
        best = d;
      }
    }
  }
  return best;
}

float q4_group_scale(const float* x, float extreme) {
  // The search is most of what encoding a q4 row costs; the AVX-512 one makes the same choice.
  static const bool avx512 = cpu_features().avx512f;
  return avx512 ? avx512::q4_group_scale(x, extreme) : q4_group_scale_reference(x, extreme);
}

namespace {

// q4: per group of 32, rotated (hadamard32), d = (the element of largest magnitude) / -8,
// q = round(x / d) + 8 in [0, 15], so the extreme element lands exactly on -8 * d and the
// other side keeps 7 steps.
void write_q4_row(const float* x, int32_t n, uint8_t* tile, uint8_t* scales, int32_t row) {
  const int32_t groups = n / kKVQ4Group;
  uint8_t* q = tile + static_cast<size_t>(row) * (n / 2);
  auto* d_out = reinterpret_cast<uint16_t*>(scales) + static_cast<size_t>(row) * groups;
  for (int32_t g = 0; g < groups; ++g) {
    float xg[kKVQ4Group];
    std::memcpy(xg, x + g * kKVQ4Group, sizeof xg);
    hadamard32(xg);
    float extreme = 0.0f;
    for (int32_t i = 0; i < kKVQ4Group; ++i) {
      if (std::fabs(xg[i]) > std::fabs(extreme)) extreme = xg[i];
    }
    const float d = store_scale(q4_group_scale(xg, extreme), d_out + g);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int32_t i = 0; i < kKVQ4Group; i += 2) {
      const auto lo =
          static_cast<uint8_t>(std::clamp(std::nearbyint(xg[i] * inv) + 8.0f, 0.0f, 15.0f));
      const auto hi =
          static_cast<uint8_t>(std::clamp(std::nearbyint(xg[i + 1] * inv) + 8.0f, 0.0f, 15.0f));
      q[(g * kKVQ4Group + i) / 2] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// q4c: per channel c, the minimum and the step over the n rows, then the codes (layout in
// kv_dtype.h). A code depends only on its own channel's values.
void write_q4c_tile(const float* x, int32_t n, int32_t hd, uint8_t* tile, uint8_t* scales) {
  auto* d_out = reinterpret_cast<uint16_t*>(scales);
  uint16_t* m_out = d_out + hd;
  for (int32_t c = 0; c < hd; ++c) {
    float lo = x[c];
    float hi = x[c];
    for (int32_t r = 1; r < n; ++r) {
      lo = std::min(lo, x[static_cast<size_t>(r) * hd + c]);
      hi = std::max(hi, x[static_cast<size_t>(r) * hd + c]);
    }
    const float d = store_scale((hi - lo) / 15.0f, d_out + c);
    const float m = store_scale(lo, m_out + c);
    for (int32_t r = 0; r < n; ++r) {
      const float v = x[static_cast<size_t>(r) * hd + c];
      const float q = d != 0.0f ? std::clamp(std::nearbyint((v - m) / d), 0.0f, 15.0f) : 0.0f;
      uint8_t& byte = tile[static_cast<size_t>(r) * (hd / 2) + c / 2];
      const int shift = 4 * (c & 1);  // element 2i in the low nibble of byte i
      byte = static_cast<uint8_t>((byte & (0xf0 >> shift)) | (static_cast<int>(q) << shift));
    }
  }
}

}  // namespace

void hadamard32(float* x) {
  for (int32_t h = 1; h < kKVQ4Group; h *= 2) {
    for (int32_t i = 0; i < kKVQ4Group; i += 2 * h) {
      for (int32_t j = i; j < i + h; ++j) {
        const float a = x[j];
        const float b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  constexpr float kNorm = 0.17677669529663687f;  // 1 / sqrt(32)
  for (int32_t i = 0; i < kKVQ4Group; ++i) x[i] *= kNorm;
}

float fp8_e4m3_to_f32(uint8_t bits) {
  const int exp = (bits >> 3) & 0xf;
  const int mant = bits & 0x7;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -9);
  } else if (exp == 0xf && mant == 0x7) {
    v = NAN;
  } else {
    v = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return (bits & 0x80) ? -v : v;
}

uint8_t f32_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::min(std::fabs(x), kFp8Max);
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 of them reach 2^-6 exactly)
    const auto m = static_cast<uint8_t>(std::nearbyint(a * 512.0f));
    return static_cast<uint8_t>(sign | m);  // m == 8 is exponent 1, mantissa 0: right
  }
  int e = 0;
  const float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  int exp = e - 1 + 7;                   // a = 1.m * 2^(e - 1)
  auto mant = static_cast<int>(std::nearbyint((frac * 2.0f - 1.0f) * 8.0f));
  if (mant == 8) {
    mant = 0;
    ++exp;
  }
  if (exp > 15 || (exp == 15 && mant == 7)) return static_cast<uint8_t>(sign | 0x7e);  // 448
  return static_cast<uint8_t>(sign | (exp << 3) | mant);
}

void kv_write_row(KVDType dtype, const float* x, int32_t head_dim, uint8_t* tile,
                  uint8_t* tile_scales, int32_t row) {
  assert(kv_dtype_supports(dtype, head_dim) && row >= 0);
  assert(kv_dtype_writes_rows(dtype) && "q4c tiles are written whole: kv_write_tile");
  const size_t row_bytes = kv_row_bytes(dtype, head_dim);
  uint8_t* dst = tile + static_cast<size_t>(row) * row_bytes;
  switch (dtype) {
    case KVDType::F16:
      for (int32_t i = 0; i < head_dim; ++i) {
        const uint16_t h = f32_to_fp16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case KVDType::BF16:
      for (int32_t i = 0; i < head_dim; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case KVDType::F32:
      std::memcpy(dst, x, row_bytes);
      break;
    case KVDType::Int8:
    case KVDType::Fp8:
      write_scaled_row(dtype, x, head_dim, dst, reinterpret_cast<uint16_t*>(tile_scales) + row);
      break;
    case KVDType::Q4:
      write_q4_row(x, head_dim, tile, tile_scales, row);
      break;
    case KVDType::Q4C:  // no row alone: refused above
      break;
  }
}

void kv_write_tile(KVDType dtype, const float* rows, int32_t n_rows, int32_t head_dim,
                   uint8_t* tile, uint8_t* tile_scales) {
  assert(kv_dtype_supports(dtype, head_dim) && n_rows >= 1);
  if (dtype == KVDType::Q4C) {
    write_q4c_tile(rows, n_rows, head_dim, tile, tile_scales);
    return;
  }
  for (int32_t r = 0; r < n_rows; ++r) {
    kv_write_row(dtype, rows + static_cast<size_t>(r) * head_dim, head_dim, tile, tile_scales, r);
  }
}

void kv_decode_row(KVDType dtype, const uint8_t* tile, const uint8_t* tile_scales, int32_t head_dim,
                   int32_t row, float* out) {
  assert(kv_dtype_supports(dtype, head_dim) && row >= 0);
  const uint8_t* src = tile + static_cast<size_t>(row) * kv_row_bytes(dtype, head_dim);
  uint16_t h;
  switch (dtype) {
    case KVDType::F16:
      for (int32_t i = 0; i < head_dim; ++i) {
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = fp16_to_f32(h);
      }
      break;
    case KVDType::BF16:
      for (int32_t i = 0; i < head_dim; ++i) {
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
    case KVDType::F32:
      std::memcpy(out, src, static_cast<size_t>(head_dim) * sizeof(float));
      break;
    case KVDType::Int8:
    case KVDType::Fp8: {
      const float d = load_scale(reinterpret_cast<const uint16_t*>(tile_scales) + row);
      for (int32_t i = 0; i < head_dim; ++i) {
        const float q = dtype == KVDType::Int8 ? static_cast<float>(static_cast<int8_t>(src[i]))
                                               : fp8_e4m3_to_f32(src[i]);
        out[i] = q * d;
      }
      break;
    }
    case KVDType::Q4: {
      const int32_t groups = head_dim / kKVQ4Group;
      const auto* d =
          reinterpret_cast<const uint16_t*>(tile_scales) + static_cast<size_t>(row) * groups;
      for (int32_t i = 0; i < head_dim; ++i) {
        const int q = (src[i / 2] >> (4 * (i & 1))) & 0xf;
        out[i] = static_cast<float>(q - 8) * load_scale(d + i / kKVQ4Group);
      }
      for (int32_t g = 0; g < groups; ++g) hadamard32(out + g * kKVQ4Group);
      break;
    }
    case KVDType::Q4C: {
      const auto* d = reinterpret_cast<const uint16_t*>(tile_scales);
      const uint16_t* m = d + head_dim;
      for (int32_t i = 0; i < head_dim; ++i) {
        const int q = (src[i / 2] >> (4 * (i & 1))) & 0xf;
        out[i] = load_scale(m + i) + static_cast<float>(q) * load_scale(d + i);
      }
      break;
    }
  }
}

}  // namespace tokamak::cpu
