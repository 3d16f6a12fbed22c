// Scalar kernels: the reference that every SIMD kernel is tested against, and the code path
// on CPUs without AVX2. Block dot products sum each block's integer products exactly, then
// accumulate sumi * (dw * dx) (+ mw * sx for Q4_1) in block order, as ggml's generic code.

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/fp16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ggml_math.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/kquant_dots.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/rope.h"

namespace tokamak::cpu {
namespace {

float dot_q4_0_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q4_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((a[i].qs[j] & 0x0f) - 8) * b[i].qs[j];
      sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + kQK / 2];
    }
    sum += static_cast<float>(sumi) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

float dot_q4_1_q8_1(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q4_1*>(w);
  const auto* b = static_cast<const block_q8_1*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (a[i].qs[j] & 0x0f) * b[i].qs[j];
      sumi += (a[i].qs[j] >> 4) * b[i].qs[j + kQK / 2];
    }
    sum += static_cast<float>(sumi) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d)) +
           fp16_to_f32(a[i].m) * fp16_to_f32(b[i].s);
  }
  return sum;
}

float dot_q8_0_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q8_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += a[i].qs[j] * b[i].qs[j];
    sum += static_cast<float>(sumi) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

float dot_f16_f16(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_f32(a[i]) * fp16_to_f32(b[i]);
  return sum;
}

float dot_bf16_bf16(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(a[i]) * bf16_to_f32(b[i]);
  return sum;
}

float dot_f32_f32(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// ggml's silu * up: groups of 8 through its vector exp, the rest through libm expf.
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) out[i + l] = ggml::silu_ggml(gate[i + l]) * up[i + l];
  }
  for (; i < n; ++i) out[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
}

void attention(const float* q, const uint16_t* k, int64_t k_stride, const uint16_t* v,
               int64_t v_stride, int64_t n_kv, int32_t dk, int32_t dv, float scale,
               bool single_token_order, float* out, float* s, uint16_t* p16) {
  uint16_t q16[kMaxHeadDim];
  quantize_row_f16(q, q16, dk);
  for (int64_t j = 0; j < n_kv; ++j) {
    const uint16_t* kj = k + j * k_stride;
    if (single_token_order) {
      float acc[4][8] = {};
      const int32_t np = dk / 32 * 32;
      for (int32_t i = 0; i < np; ++i) {
        float& a = acc[(i % 32) / 8][i % 8];
        a = std::fma(fp16_to_f32(kj[i]), fp16_to_f32(q16[i]), a);
      }
      double sum = ggml::reduce4x8(acc[0], acc[1], acc[2], acc[3]);
      for (int32_t i = np; i < dk; ++i) {
        sum += static_cast<double>(fp16_to_f32(kj[i]) * fp16_to_f32(q16[i]));
      }
      s[j] = static_cast<float>(sum) * scale;
    } else {
      float acc[8] = {};
      for (int32_t i = 0; i < dk; ++i) {
        acc[i % 8] = std::fma(fp16_to_f32(kj[i]), fp16_to_f32(q16[i]), acc[i % 8]);
      }
      s[j] = ggml::hsum8(acc) * scale;
    }
  }
  float max = s[0];
  for (int64_t j = 1; j < n_kv; ++j) max = std::max(max, s[j]);
  double sum = 0.0;
  int64_t j = 0;
  for (; j + 8 <= n_kv; j += 8) {
    float e[8];
    for (int l = 0; l < 8; ++l) s[j + l] = e[l] = ggml::expf_ggml(s[j + l] - max);
    sum += static_cast<double>(ggml::hsum8(e));
  }
  if (j < n_kv) {
    // ggml pads the row with masked (-inf) positions: a partial last group, exp(-inf) = 0.
    float e[8] = {};
    for (int l = 0; j + l < n_kv; ++l) s[j + l] = e[l] = ggml::expf_ggml(s[j + l] - max);
    sum += static_cast<double>(ggml::hsum8(e));
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (j = 0; j < n_kv; ++j) p16[j] = f32_to_fp16(s[j] * inv);
  for (int32_t d = 0; d < dv; ++d) {
    if (single_token_order) {
      // The row is padded to a multiple of 32 with zero probabilities: no leftovers.
      float acc[4][8] = {};
      for (j = 0; j < n_kv; ++j) {
        float& a = acc[(j % 32) / 8][j % 8];
        a = std::fma(fp16_to_f32(v[j * v_stride + d]), fp16_to_f32(p16[j]), a);
      }
      out[d] = ggml::reduce4x8(acc[0], acc[1], acc[2], acc[3]);
    } else {
      float acc[8] = {};
      for (j = 0; j < n_kv; ++j) {
        acc[j % 8] = std::fma(fp16_to_f32(v[j * v_stride + d]), fp16_to_f32(p16[j]), acc[j % 8]);
      }
      out[d] = ggml::hsum8(acc);
    }
  }
}

void to_q8_0(const float* x, void* y, int64_t n) {
  quantize_row_q8_0_act(x, static_cast<block_q8_0*>(y), n);
}
void to_q8_1(const float* x, void* y, int64_t n) {
  quantize_row_q8_1_act(x, static_cast<block_q8_1*>(y), n);
}
void to_f16(const float* x, void* y, int64_t n) {
  quantize_row_f16(x, static_cast<uint16_t*>(y), n);
}
void to_bf16(const float* x, void* y, int64_t n) {
  quantize_row_bf16(x, static_cast<uint16_t*>(y), n);
}
void to_q8_K(const float* x, void* y, int64_t n) {
  quantize_row_q8_K_act(x, static_cast<block_q8_K*>(y), n);
}

}  // namespace

const KernelTable& scalar_kernel_table() {
  static const KernelTable table = {
      .isa = Isa::Scalar,
      .to_q8_0 = to_q8_0,
      .to_q8_1 = to_q8_1,
      .to_f16 = to_f16,
      .to_bf16 = to_bf16,
      .to_q8_K = to_q8_K,
      .q4_0 = dot_by_rows<dot_q4_0_q8_0>(),
      .q4_1 = dot_by_rows<dot_q4_1_q8_1>(),
      .q8_0 = dot_by_rows<dot_q8_0_q8_0>(),
      .f16 = dot_by_rows<dot_f16_f16>(),
      .bf16 = dot_by_rows<dot_bf16_bf16>(),
      .f32 = dot_by_rows<dot_f32_f32>(),
      .q5_0 = dot_by_rows<scalar::dot_q5_0_q8_0>(),
      .q5_1 = dot_by_rows<scalar::dot_q5_1_q8_1>(),
      .q4_k = dot_by_rows<scalar::dot_q4_K_q8_K>(),
      .q5_k = dot_by_rows<scalar::dot_q5_K_q8_K>(),
      .q6_k = dot_by_rows<scalar::dot_q6_K_q8_K>(),
      .silu_mul = silu_mul,
      .rope_apply = rope_apply,
      .attention = attention,
      .paged_attention_span = scalar::paged_attention_span,
  };
  return table;
}

}  // namespace tokamak::cpu
