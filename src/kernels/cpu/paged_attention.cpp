// The front of the paged attention kernels and their scalar reference: the arithmetic of
// paged_attention.h line by line, one head at a time, in plain float operations (std::exp;
// no std::fma, which is a library call on CPUs without FMA, where this form is the fast path).

#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/cpu/kv_codec.h"

namespace tokamak::cpu {

void paged_attention(const KernelTable& kt, const PagedAttentionArgs& a) {
  assert(a.q != nullptr && a.out != nullptr && a.k != nullptr && a.v != nullptr);
  assert(a.block_table != nullptr && a.block_size >= 1);
  assert(a.n_group >= 1 && a.n_group <= kMaxGroup && a.n_kv >= 1);
  assert(a.head_dim_k >= 1 && a.head_dim_k <= kMaxHeadDim);
  assert(a.head_dim_v >= 1 && a.head_dim_v <= kMaxHeadDim);
  assert(a.q_stride >= a.head_dim_k && a.out_stride >= a.head_dim_v);
  assert(kv_dtype_supports(a.dtypes.k, a.head_dim_k) &&
         kv_dtype_supports(a.dtypes.v, a.head_dim_v));
  assert(a.k_scales != nullptr || kv_tile_scale_bytes(a.dtypes.k, a.block_size, a.head_dim_k) == 0);
  assert(a.v_scales != nullptr || kv_tile_scale_bytes(a.dtypes.v, a.block_size, a.head_dim_v) == 0);
  assert(a.scores == nullptr || a.scores_stride >= a.n_kv);
  kt.paged_attention(a);
}

namespace scalar {

void paged_attention(const PagedAttentionArgs& a) {
  const int32_t dk = a.head_dim_k;
  const int32_t dv = a.head_dim_v;
  for (int32_t g = 0; g < a.n_group; ++g) {
    const float* q = a.q + g * a.q_stride;
    float* out = a.out + g * a.out_stride;
    float acc[kMaxHeadDim] = {};
    float m = -INFINITY;
    float l = 0.0f;
    for (int64_t t0 = 0; t0 < a.n_kv; t0 += kPagedTile) {
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(kPagedTile, a.n_kv - t0));
      // The tile's K and V rows decoded to F32 (kPagedTile * 2 * kMaxHeadDim floats).
      float krow[kPagedTile][kMaxHeadDim];
      float vrow[kPagedTile][kMaxHeadDim];
      for (int32_t j = 0; j < n; ++j) {
        const int64_t block = a.block_table[(t0 + j) / a.block_size];
        const auto row = static_cast<int32_t>((t0 + j) % a.block_size);
        kv_decode_row(a.dtypes.k, a.k + block * a.k_block_stride,
                      a.k_scales + block * a.k_scale_block_stride, dk, row, krow[j]);
        kv_decode_row(a.dtypes.v, a.v + block * a.v_block_stride,
                      a.v_scales + block * a.v_scale_block_stride, dv, row, vrow[j]);
      }
      float s[kPagedTile];
      float tile_max = -INFINITY;
      for (int32_t j = 0; j < n; ++j) {
        float dot = 0.0f;
        for (int32_t i = 0; i < dk; ++i) dot += q[i] * krow[j][i];
        s[j] = dot * a.scale;
        tile_max = std::max(tile_max, s[j]);
      }
      if (a.scores != nullptr) std::copy(s, s + n, a.scores + g * a.scores_stride + t0);
      const float m_new = std::max(m, tile_max);
      const float alpha = std::exp(m - m_new);
      float sum = 0.0f;
      for (int32_t j = 0; j < n; ++j) {
        s[j] = std::exp(s[j] - m_new);
        sum += s[j];
      }
      l = l * alpha + sum;
      m = m_new;
      for (int32_t d = 0; d < dv; ++d) acc[d] *= alpha;
      for (int32_t j = 0; j < n; ++j) {
        for (int32_t d = 0; d < dv; ++d) acc[d] += s[j] * vrow[j][d];
      }
    }
    const float inv = 1.0f / l;
    for (int32_t d = 0; d < dv; ++d) out[d] = acc[d] * inv;
  }
}

}  // namespace scalar
}  // namespace tokamak::cpu
