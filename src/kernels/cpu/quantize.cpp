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

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    // The scale maps the element of largest magnitude, with its sign, to -8.
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      // Truncation of (v + 8.5) rounds half up; 16 (from x == max exactly) clamps to 15.
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) {
  assert(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>((x[j + kQK / 2] - min) * id + 0.5f)));
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
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

bool can_quantize(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q4_0:
    case DType::Q4_1:
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
    default:
      assert(false && "dequantize_row: unsupported dtype");
  }
}

}  // namespace tokamak::cpu
