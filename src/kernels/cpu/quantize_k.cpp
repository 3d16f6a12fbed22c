// Encoders and decoders of the K-quants (super-blocks of 256 elements; quantize.h says why the
// weight encoders are our own) and of the Q8_K activation rows.

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/cpu/quantize.h"

namespace tokamak::cpu {
namespace {

int nearest(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// The inverse of kq_scale_min: 6-bit scales and mins of eight sub-blocks into 12 bytes.
void pack_scale_min(const int* sc, const int* m, uint8_t* scales) {
  std::memset(scales, 0, kKScaleBytes);
  for (int s = 0; s < 4; ++s) {
    scales[s] = static_cast<uint8_t>(sc[s]);
    scales[s + 4] = static_cast<uint8_t>(m[s]);
  }
  for (int s = 4; s < 8; ++s) {
    scales[s + 4] = static_cast<uint8_t>((sc[s] & 0x0f) | (m[s] & 0x0f) << 4);
    scales[s - 4] |= static_cast<uint8_t>((sc[s] >> 4) << 6);
    scales[s] |= static_cast<uint8_t>((m[s] >> 4) << 6);
  }
}

// One Q4_K / Q5_K super-block (nmax 15 / 31): each sub-block's range [min(0, lo), hi] mapped
// onto 0..nmax, the sub-block scales and mins quantized to 6 bits against the largest of each.
// Writes d, dmin, the packed scales and the codes q[0, 256).
void quantize_q45_K(const float* x, int nmax, uint16_t& d, uint16_t& dmin, uint8_t* scales,
                    int* q) {
  float scale[8];
  float min[8];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    const float* sub = x + 32 * s;
    float lo = 0.0f;
    float hi = -FLT_MAX;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, sub[l]);
      hi = std::max(hi, sub[l]);
    }
    scale[s] = std::max(0.0f, hi - lo) / static_cast<float>(nmax);
    min[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, min[s]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  int sc[8];
  int m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = std::min(63, nearest(scale[s] * inv_scale));
    m[s] = std::min(63, nearest(min[s] * inv_min));
  }
  pack_scale_min(sc, m, scales);
  d = f32_to_fp16(max_scale / 63.0f);
  dmin = f32_to_fp16(max_min / 63.0f);
  for (int s = 0; s < 8; ++s) {
    const float ds = fp16_to_f32(d) * static_cast<float>(sc[s]);
    const float ms = fp16_to_f32(dmin) * static_cast<float>(m[s]);
    for (int l = 0; l < 32; ++l) {
      const int v = ds > 0.0f ? nearest((x[32 * s + l] + ms) / ds) : 0;
      q[32 * s + l] = std::clamp(v, 0, nmax);
    }
  }
}

// Codes of a Q4_K / Q5_K super-block into qs (low nibbles) and, for Q5_K, qh.
void pack_q45_K(const int* q, uint8_t* qs, uint8_t* qh) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] =
          static_cast<uint8_t>((q[64 * c + l] & 0x0f) | (q[64 * c + 32 + l] & 0x0f) << 4);
    }
  }
  if (qh == nullptr) return;
  std::memset(qh, 0, kQK_K / 8);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) qh[l] |= static_cast<uint8_t>((q[32 * s + l] >> 4) << s);
  }
}

void dequantize_q45_K(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs,
                      const uint8_t* qh, float* y) {
  const float d = fp16_to_f32(d16);
  const float dmin = fp16_to_f32(dmin16);
  for (int s = 0; s < 8; ++s) {
    int sc = 0;
    int m = 0;
    kq_scale_min(scales, s, sc, m);
    const float ds = d * static_cast<float>(sc);
    const float ms = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if (qh != nullptr) v |= ((qh[l] >> s) & 1) << 4;
      y[32 * s + l] = ds * static_cast<float>(v) - ms;
    }
  }
}

// Position of element e of a Q6_K super-block: the byte of ql and its shift, the byte of qh
// and its shift (quant_blocks.h).
struct Q6Place {
  int ql;
  int ql_shift;
  int qh;
  int qh_shift;
};

Q6Place q6_place(int e) {
  const int h = e / 128;
  const int g = e % 128 / 32;
  const int l = e % 32;
  return {64 * h + 32 * (g & 1) + l, g < 2 ? 0 : 4, 32 * h + l, 2 * g};
}

}  // namespace

void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    int q[kQK_K];
    quantize_q45_K(x, 15, y[b].d, y[b].dmin, y[b].scales, q);
    pack_q45_K(q, y[b].qs, nullptr);
  }
}

void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    int q[kQK_K];
    quantize_q45_K(x, 31, y[b].d, y[b].dmin, y[b].scales, q);
    pack_q45_K(q, y[b].qs, y[b].qh);
  }
}

void quantize_row_q6_K(const float* x, block_q6_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    // Each sub-block of 16: its element of largest magnitude, with its sign, maps to -32;
    // the sub-block scales to int8 with the largest (with its sign) at -128.
    float scale[16];
    float max_scale = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float amax = 0.0f;
      float max = 0.0f;
      for (int l = 0; l < 16; ++l) {
        if (amax < std::fabs(x[16 * s + l])) {
          amax = std::fabs(x[16 * s + l]);
          max = x[16 * s + l];
        }
      }
      scale[s] = max / -32.0f;
      if (std::fabs(scale[s]) > std::fabs(max_scale)) max_scale = scale[s];
    }
    const float iscale = max_scale != 0.0f ? -128.0f / max_scale : 0.0f;
    y[b].d = f32_to_fp16(iscale != 0.0f ? 1.0f / iscale : 0.0f);
    std::memset(y[b].ql, 0, sizeof(y[b].ql));
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int s = 0; s < 16; ++s) {
      const int ls = std::clamp(nearest(iscale * scale[s]), -128, 127);
      y[b].scales[s] = static_cast<int8_t>(ls);
      const float ds = fp16_to_f32(y[b].d) * static_cast<float>(ls);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * s + l;
        const int q = (ds != 0.0f ? std::clamp(nearest(x[e] / ds), -32, 31) : 0) + 32;
        const Q6Place at = q6_place(e);
        y[b].ql[at.ql] |= static_cast<uint8_t>((q & 0x0f) << at.ql_shift);
        y[b].qh[at.qh] |= static_cast<uint8_t>((q >> 4) << at.qh_shift);
      }
    }
  }
}

void quantize_row_q8_K_act(const float* x, block_q8_K* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = amax / 127.0f;
    for (int i = 0; i < kQK_K / 16; ++i) {
      int sum = 0;
      for (int j = 16 * i; j < 16 * i + 16; ++j) {
        y[b].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));  // half to even
        sum += y[b].qs[j];
      }
      y[b].bsums[i] = static_cast<int16_t>(sum);
    }
  }
}

void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    dequantize_q45_K(x[b].d, x[b].dmin, x[b].scales, x[b].qs, nullptr, y + b * kQK_K);
  }
}

void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    dequantize_q45_K(x[b].d, x[b].dmin, x[b].scales, x[b].qs, x[b].qh, y + b * kQK_K);
  }
}

void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < kQK_K; ++e) {
      const Q6Place at = q6_place(e);
      const int q = ((x[b].ql[at.ql] >> at.ql_shift) & 0x0f) | ((x[b].qh[at.qh] >> at.qh_shift) & 3)
                                                                   << 4;
      y[e] = d * static_cast<float>(x[b].scales[e / 16]) * static_cast<float>(q - 32);
    }
  }
}

void dequantize_row_q8_K(const block_q8_K* x, float* y, int64_t n) {
  assert(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int j = 0; j < kQK_K; ++j) y[b * kQK_K + j] = static_cast<float>(x[b].qs[j]) * x[b].d;
  }
}

}  // namespace tokamak::cpu
