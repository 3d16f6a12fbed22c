// AVX2 forms of the kernels that reproduce llama.cpp's rounding (ggml_math.h, attention.h):
// silu * up through ggml's vector exp, and attention. Each equals its scalar twin in
// kernels_scalar.cpp bit for bit.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu::avx2 {

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
}

namespace {

// ggml_vec_dot_f16's reduction of four 8-lane accumulators (see attention.h).
inline float reduce4x8(const __m256* a) {
  const __m256 r = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
  const __m128 u = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(u, u));
}

// Single-token order for the value sum: 32 partial sums per output dimension, position j
// into accumulator (j % 32) / 8, lane j % 8.
void attention_values_4x8(const uint16_t* v, int64_t v_stride, int64_t n_kv, int32_t dv,
                          const uint16_t* p16, float* out) {
  thread_local std::vector<float> acc_buf;
  acc_buf.assign(static_cast<size_t>(32) * static_cast<size_t>(dv), 0.0f);
  float* acc = acc_buf.data();  // [32][dv]
  for (int64_t j = 0; j < n_kv; ++j) {
    float* a = acc + (j % 32) * dv;
    const uint16_t* vj = v + j * v_stride;
    const float pj = half(p16[j]);
    const __m256 p = _mm256_set1_ps(pj);
    int32_t d = 0;
    for (; d + 8 <= dv; d += 8) {
      _mm256_storeu_ps(a + d, _mm256_fmadd_ps(load_f16(vj + d), p, _mm256_loadu_ps(a + d)));
    }
    for (; d < dv; ++d) a[d] = std::fma(half(vj[d]), pj, a[d]);
  }
  // Partial (c, l) sits in row 8c + l.
  for (int32_t d = 0; d < dv; ++d) {
    float r[8];
    for (int l = 0; l < 8; ++l) {
      r[l] = (acc[(0 + l) * dv + d] + acc[(16 + l) * dv + d]) +
             (acc[(8 + l) * dv + d] + acc[(24 + l) * dv + d]);
    }
    const float t0 = r[0] + r[4], t1 = r[1] + r[5], t2 = r[2] + r[6], t3 = r[3] + r[7];
    out[d] = (t0 + t1) + (t2 + t3);
  }
}

}  // namespace

// See attention.h; the scalar twin in kernels_scalar.cpp gives the same bits.
void attention(const float* q, const uint16_t* k, int64_t k_stride, const uint16_t* v,
               int64_t v_stride, int64_t n_kv, int32_t dk, int32_t dv, float scale,
               bool single_token_order, float* out, float* s, uint16_t* p16) {
  alignas(32) uint16_t q16[kMaxHeadDim + 8] = {};
  to_f16_row(q, q16, dk);
  const int32_t dk8 = dk / 8 * 8;
  const int32_t dk32 = dk / 32 * 32;
  for (int64_t j = 0; j < n_kv; ++j) {
    const uint16_t* kj = k + j * k_stride;
    if (single_token_order) {
      __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
      for (int32_t i = 0; i < dk32; i += 32) {
        for (int c = 0; c < 4; ++c) {
          a[c] = _mm256_fmadd_ps(load_f16(kj + i + 8 * c), load_f16(q16 + i + 8 * c), a[c]);
        }
      }
      double sum = reduce4x8(a);
      for (int32_t i = dk32; i < dk; ++i) sum += static_cast<double>(half(kj[i]) * half(q16[i]));
      s[j] = static_cast<float>(sum) * scale;
      continue;
    }
    __m256 acc = _mm256_setzero_ps();
    for (int32_t i = 0; i < dk8; i += 8) {
      acc = _mm256_fmadd_ps(load_f16(kj + i), load_f16(q16 + i), acc);
    }
    if (dk8 < dk) {
      uint16_t tail[8] = {};
      std::memcpy(tail, kj + dk8, static_cast<size_t>(dk - dk8) * 2);
      acc = _mm256_fmadd_ps(load_f16(tail), load_f16(q16 + dk8), acc);
    }
    s[j] = hsum(acc) * scale;
  }
  float max = s[0];
  for (int64_t j = 1; j < n_kv; ++j) max = std::max(max, s[j]);
  double sum = 0.0;
  int64_t j = 0;
  for (; j + 8 <= n_kv; j += 8) {
    const __m256 e = exp_ggml(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(max)));
    _mm256_storeu_ps(s + j, e);
    sum += static_cast<double>(hsum(e));
  }
  if (j < n_kv) {
    // ggml pads the row with masked (-inf) positions: a partial last group, exp(-inf) = 0.
    alignas(32) float tail[8];
    for (int l = 0; l < 8; ++l) tail[l] = j + l < n_kv ? s[j + l] : -INFINITY;
    const __m256 e = exp_ggml(_mm256_sub_ps(_mm256_load_ps(tail), _mm256_set1_ps(max)));
    _mm256_store_ps(tail, e);
    for (int l = 0; j + l < n_kv; ++l) s[j + l] = tail[l];
    sum += static_cast<double>(hsum(e));
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (j = 0; j < n_kv; ++j) p16[j] = static_cast<uint16_t>(_cvtss_sh(s[j] * inv, 0));

  if (single_token_order) {
    attention_values_4x8(v, v_stride, n_kv, dv, p16, out);
    return;
  }
  // Eight partial sums per output dimension, position j into partial j % 8.
  alignas(32) float acc[8][kMaxHeadDim + 8];
  const int32_t dv8 = dv / 8 * 8;
  for (int l = 0; l < 8; ++l) std::memset(acc[l], 0, static_cast<size_t>(dv) * 4);
  for (j = 0; j < n_kv; ++j) {
    float* a = acc[j & 7];
    const uint16_t* vj = v + j * v_stride;
    const float pj = half(p16[j]);
    const __m256 p = _mm256_set1_ps(pj);
    for (int32_t d = 0; d < dv8; d += 8) {
      _mm256_store_ps(a + d, _mm256_fmadd_ps(load_f16(vj + d), p, _mm256_load_ps(a + d)));
    }
    for (int32_t d = dv8; d < dv; ++d) a[d] = std::fma(half(vj[d]), pj, a[d]);
  }
  for (int32_t d = 0; d < dv; ++d) {
    const float t0 = acc[4][d] + acc[0][d], t1 = acc[5][d] + acc[1][d];
    const float t2 = acc[6][d] + acc[2][d], t3 = acc[7][d] + acc[3][d];
    out[d] = (t0 + t2) + (t1 + t3);
  }
}

}  // namespace tokamak::cpu::avx2
