#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/fp16.h"

namespace tokamak::cpu {

void quantize_row_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void quantize_row_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

namespace {

// The element of largest magnitude of a block, with its sign (the first of equal ones).
float largest_magnitude(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Writes the 5-bit codes q[0, 32) of one block: low nibbles into qs, fifth bits into qh.
void pack_q5(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + kQK / 2] & 0x0f) << 4);
    high |= static_cast<uint32_t>(q[j] >> 4) << j;
    high |= static_cast<uint32_t>(q[j + kQK / 2] >> 4) << (j + kQK / 2);
  }
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(high >> (8 * b));
}

// The 5-bit codes of one block, 0..31.
void unpack_q5(const uint8_t* qs, const uint8_t* qh, int* q) {
  uint32_t high = 0;
  for (int b = 0; b < 4; ++b) high |= static_cast<uint32_t>(qh[b]) << (8 * b);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (qs[j] & 0x0f) | static_cast<int>((high >> j) & 1) << 4;
    q[j + kQK / 2] = (qs[j] >> 4) | static_cast<int>((high >> (j + kQK / 2)) & 1) << 4;
  }
}

// GGML's two reference encodings of a 32-element block into codes 0..2h-1 (h = 8 for the 4-bit
// types, 16 for the 5-bit ones). Truncation of (v + 0.5) rounds half up, and the code 2h that
// the extreme element can reach clamps to 2h - 1.
//
// Symmetric (Q4_0, Q5_0): the element of largest magnitude, with its sign, maps to -h; returns
// the scale d, x = (q - h) * d.
float symmetric_codes(const float* x, int h, int* q) {
  const float d = largest_magnitude(x) / static_cast<float>(-h);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = std::min(2 * h - 1, static_cast<int>(static_cast<int8_t>(x[j] * id + (h + 0.5f))));
  }
  return d;
}

// Affine (Q4_1, Q5_1): [min, max] maps onto the codes; x = q * d + min.
void affine_codes(const float* x, int h, int* q, float& d, float& min) {
  min = FLT_MAX;
  float max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  d = (max - min) / static_cast<float>(2 * h - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) {
    q[j] = std::min(2 * h - 1, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
  }
}

// 4-bit codes into nibbles: element j low, element j + 16 high.
void pack_q4(const int* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + kQK / 2] << 4));
}

}  // namespace

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    int q[kQK];
    y[b].d = f32_to_fp16(symmetric_codes(x, 8, q));
    pack_q4(q, y[b].qs);
  }
}

void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    int q[kQK];
    float d = 0.0f;
    float min = 0.0f;
    affine_codes(x, 8, q, d, min);
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    pack_q4(q, y[b].qs);
  }
}

void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    int q[kQK];
    y[b].d = f32_to_fp16(symmetric_codes(x, 16, q));
    pack_q5(q, y[b].qs, y[b].qh);
  }
}

void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    int q[kQK];
    float d = 0.0f;
    float min = 0.0f;
    affine_codes(x, 16, q, d, min);
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    pack_q5(q, y[b].qs, y[b].qh);
  }
}

namespace {

// One block of the activation encoding: returns the scale d and writes q = rint(x * 127/amax).
inline float quantize_block_act(const float* x, int8_t* q, int* sum) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int s = 0;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));  // half to even
    s += q[j];
  }
  *sum = s;
  return d;
}

}  // namespace

void quantize_row_q8_0_act(const float* x, block_q8_0* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum = 0;
    y[b].d = f32_to_fp16(quantize_block_act(x + b * kQK, y[b].qs, &sum));
  }
}

void quantize_row_q8_1_act(const float* x, block_q8_1* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum = 0;
    const float d = quantize_block_act(x + b * kQK, y[b].qs, &sum);
    y[b].d = f32_to_fp16(d);
    y[b].s = f32_to_fp16(d * static_cast<float>(sum));
  }
}

void dequantize_row_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[b * kQK + j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const block_q8_1* x, float* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[b * kQK + j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[b * kQK + j] = static_cast<float>((x[b].qs[j] & 0x0f) - 8) * d;
      y[b * kQK + j + kQK / 2] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_f32(x[b].d);
    const float m = fp16_to_f32(x[b].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[b * kQK + j] = static_cast<float>(x[b].qs[j] & 0x0f) * d + m;
      y[b * kQK + j + kQK / 2] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d);
    int q[kQK];
    unpack_q5(x[b].qs, x[b].qh, q);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
  }
}

void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_f32(x[b].d);
    const float m = fp16_to_f32(x[b].m);
    int q[kQK];
    unpack_q5(x[b].qs, x[b].qh, q);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

bool can_quantize(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

void quantize_row(DType dtype, const float* x, void* y, int64_t n) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      return quantize_row_f16(x, static_cast<uint16_t*>(y), n);
    case DType::BF16:
      return quantize_row_bf16(x, static_cast<uint16_t*>(y), n);
    case DType::Q8_0:
      return quantize_row_q8_0(x, static_cast<block_q8_0*>(y), n);
    case DType::Q8_1:
      return quantize_row_q8_1(x, static_cast<block_q8_1*>(y), n);
    case DType::Q4_0:
      return quantize_row_q4_0(x, static_cast<block_q4_0*>(y), n);
    case DType::Q4_1:
      return quantize_row_q4_1(x, static_cast<block_q4_1*>(y), n);
    case DType::Q5_0:
      return quantize_row_q5_0(x, static_cast<block_q5_0*>(y), n);
    case DType::Q5_1:
      return quantize_row_q5_1(x, static_cast<block_q5_1*>(y), n);
    case DType::Q4_K:
      return quantize_row_q4_K(x, static_cast<block_q4_K*>(y), n);
    case DType::Q5_K:
      return quantize_row_q5_K(x, static_cast<block_q5_K*>(y), n);
    case DType::Q6_K:
      return quantize_row_q6_K(x, static_cast<block_q6_K*>(y), n);
    default:
      assert(false && "quantize_row: unsupported dtype");
  }
}

void dequantize_row(DType dtype, const void* x, float* y, int64_t n) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      return dequantize_row_f16(static_cast<const uint16_t*>(x), y, n);
    case DType::BF16:
      return dequantize_row_bf16(static_cast<const uint16_t*>(x), y, n);
    case DType::Q8_0:
      return dequantize_row_q8_0(static_cast<const block_q8_0*>(x), y, n);
    case DType::Q8_1:
      return dequantize_row_q8_1(static_cast<const block_q8_1*>(x), y, n);
    case DType::Q4_0:
      return dequantize_row_q4_0(static_cast<const block_q4_0*>(x), y, n);
    case DType::Q4_1:
      return dequantize_row_q4_1(static_cast<const block_q4_1*>(x), y, n);
    case DType::Q5_0:
      return dequantize_row_q5_0(static_cast<const block_q5_0*>(x), y, n);
    case DType::Q5_1:
      return dequantize_row_q5_1(static_cast<const block_q5_1*>(x), y, n);
    case DType::Q4_K:
      return dequantize_row_q4_K(static_cast<const block_q4_K*>(x), y, n);
    case DType::Q5_K:
      return dequantize_row_q5_K(static_cast<const block_q5_K*>(x), y, n);
    case DType::Q6_K:
      return dequantize_row_q6_K(static_cast<const block_q6_K*>(x), y, n);
    case DType::Q8_K:
      return dequantize_row_q8_K(static_cast<const block_q8_K*>(x), y, n);
    default:
      assert(false && "dequantize_row: unsupported dtype");
  }
}

}  // namespace tokamak::cpu
