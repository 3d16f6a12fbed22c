// The front of the paged attention kernels and their scalar reference: the arithmetic of
// paged_attention.h line by line, one head at a time, in plain float operations (std::exp;
// no std::fma, which is a library call on CPUs without FMA, where this form is the fast path).

#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/cpu/kv_codec.h"

namespace tokamak::cpu {

PagedPool pool_of(const PagedKVView& view, int32_t kv_head, const int32_t* block_table) {
  return {.dtypes = view.dtypes,
          .k = view.k_tile(0, kv_head),
          .v = view.v_tile(0, kv_head),
          .k_block_stride = static_cast<int64_t>(view.k_block_stride()),
          .v_block_stride = static_cast<int64_t>(view.v_block_stride()),
          .k_scales = view.k_tile_scales(0, kv_head),
          .v_scales = view.v_tile_scales(0, kv_head),
          .k_scale_block_stride = static_cast<int64_t>(view.k_scale_block_stride()),
          .v_scale_block_stride = static_cast<int64_t>(view.v_scale_block_stride()),
          .block_table = block_table};
}

int32_t paged_segments(const PagedAttentionArgs& a, PagedSegment (&seg)[2]) {
  int32_t n = 0;
  if (a.n_cold > 0) {
    static_cast<PagedPool&>(seg[n]) = a.cold;
    seg[n].begin = 0;
    seg[n++].end = a.n_cold;
  }
  if (a.n_kv > a.n_cold) {
    static_cast<PagedPool&>(seg[n]) = static_cast<const PagedPool&>(a);
    seg[n].begin = a.n_cold;
    seg[n++].end = a.n_kv;
  }
  return n;
}

namespace {

void check_args(const PagedAttentionArgs& a) {
  assert(a.q != nullptr && a.out != nullptr && a.block_size >= 1);
  assert(a.n_group >= 1 && a.n_group <= kMaxGroup && a.n_kv >= 1);
  assert(a.head_dim_k >= 1 && a.head_dim_k <= kMaxHeadDim);
  assert(a.head_dim_v >= 1 && a.head_dim_v <= kMaxHeadDim);
  assert(a.q_stride >= a.head_dim_k && a.out_stride >= a.head_dim_v);
  assert(a.n_cold >= 0 && a.n_cold <= a.n_kv && a.n_cold % a.block_size == 0);
  assert(a.scores == nullptr || a.scores_stride >= a.n_kv);
#ifndef NDEBUG
  PagedSegment seg[2];
  const int32_t n_seg = paged_segments(a, seg);
  for (int32_t i = 0; i < n_seg; ++i) {
    const PagedSegment& s = seg[i];
    assert(s.k != nullptr && s.v != nullptr && s.block_table != nullptr);
    assert(kv_dtype_supports(s.dtypes.k, a.head_dim_k) &&
           kv_dtype_supports(s.dtypes.v, a.head_dim_v));
    assert(s.k_scales != nullptr ||
           kv_tile_scale_bytes(s.dtypes.k, a.block_size, a.head_dim_k) == 0);
    assert(s.v_scales != nullptr ||
           kv_tile_scale_bytes(s.dtypes.v, a.block_size, a.head_dim_v) == 0);
  }
#endif
  (void)a;
}

}  // namespace

void paged_prefetch_tile(const PagedAttentionArgs& a, const PagedSegment& sg, int64_t t0,
                         int64_t block, int32_t offset) {
  const auto k_row = static_cast<int64_t>(kv_row_bytes(sg.dtypes.k, a.head_dim_k));
  const auto v_row = static_cast<int64_t>(kv_row_bytes(sg.dtypes.v, a.head_dim_v));
  const int64_t end = std::min<int64_t>(sg.end, t0 + kPagedTile);
  const auto prefetch = [](const uint8_t* p, int64_t bytes) {
    for (int64_t byte = 0; byte < bytes; byte += 64) __builtin_prefetch(p + byte, 0, 2);  // T1
  };
  while (t0 < end) {
    // The rest of this block (or of the tile): contiguous rows.
    const int64_t rows = std::min<int64_t>(a.block_size - offset, end - t0);
    const int64_t b = sg.block_table[block];
    prefetch(sg.k + b * sg.k_block_stride + offset * k_row, rows * k_row);
    prefetch(sg.v + b * sg.v_block_stride + offset * v_row, rows * v_row);
    if (sg.dtypes.k == KVDType::Q4C) {
      prefetch(sg.k_scales + b * sg.k_scale_block_stride, 4 * int64_t{a.head_dim_k});
    }
    if (sg.dtypes.v == KVDType::Q4C) {
      prefetch(sg.v_scales + b * sg.v_scale_block_stride, 4 * int64_t{a.head_dim_v});
    }
    t0 += rows;
    offset = 0;
    ++block;
  }
}

void paged_prefetch(const PagedAttentionArgs& a, int64_t begin) {
  PagedSegment seg[2];
  const int32_t n_seg = paged_segments(a, seg);
  const PagedSegment& sg = n_seg == 2 && begin >= seg[1].begin ? seg[1] : seg[0];
  paged_prefetch_tile(a, sg, begin, (begin - sg.begin) / a.block_size,
                      static_cast<int32_t>((begin - sg.begin) % a.block_size));
}

void paged_merge(const PagedPartial& into, const PagedPartial& next, int32_t n_group,
                 int32_t head_dim_v) {
  for (int32_t g = 0; g < n_group; ++g) {
    const float m = std::max(into.m[g], next.m[g]);
    const float a = std::exp(into.m[g] - m);
    const float b = std::exp(next.m[g] - m);
    into.l[g] = into.l[g] * a + next.l[g] * b;
    float* acc = into.acc + g * head_dim_v;
    const float* add = next.acc + g * head_dim_v;
    for (int32_t d = 0; d < head_dim_v; ++d) acc[d] = acc[d] * a + add[d] * b;
    into.m[g] = m;
  }
}

void paged_finish(const PagedAttentionArgs& a, const PagedPartial* parts, int64_t n) {
  for (int64_t s = 1; s < n; ++s) paged_merge(parts[0], parts[s], a.n_group, a.head_dim_v);
  for (int32_t g = 0; g < a.n_group; ++g) {
    const float inv = 1.0f / parts[0].l[g];
    const float* acc = parts[0].acc + g * a.head_dim_v;
    float* out = a.out + g * a.out_stride;
    for (int32_t d = 0; d < a.head_dim_v; ++d) out[d] = acc[d] * inv;
  }
}

void paged_attention_span(const KernelTable& kt, const PagedAttentionArgs& a, int64_t span,
                          const PagedPartial& out) {
  check_args(a);
  assert(span >= 0 && span < paged_spans(a.n_kv));
  const int64_t begin = span * kPagedSpan;
  kt.paged_attention_span(a, begin, std::min(a.n_kv, begin + kPagedSpan), out);
}

void paged_attention(const KernelTable& kt, const PagedAttentionArgs& a) {
  // The merged state of the spans so far, and the span being computed.
  float m[2][kMaxGroup];
  float l[2][kMaxGroup];
  alignas(64) float acc[2][kMaxGroup * kMaxHeadDim];
  const PagedPartial parts[2] = {{m[0], l[0], acc[0]}, {m[1], l[1], acc[1]}};
  const int64_t n = paged_spans(a.n_kv);
  for (int64_t s = 0; s < n; ++s) {
    paged_attention_span(kt, a, s, parts[s == 0 ? 0 : 1]);
    if (s > 0) paged_merge(parts[0], parts[1], a.n_group, a.head_dim_v);
  }
  paged_finish(a, parts, 1);
}

void paged_attention_queries(const KernelTable& kt, const PagedAttentionArgs& a, int32_t n_queries,
                             int64_t q_step, int64_t out_step) {
  check_args(a);
  assert(n_queries >= 1);
  // One query (a decode token) gains nothing from a shared tile: the kernel's own form decodes
  // K/V in registers instead of through a scratch tile.
  if (n_queries > 1 && kt.paged_attention_queries != nullptr &&
      kt.paged_attention_queries(a, n_queries, q_step, out_step)) {
    return;
  }
  PagedAttentionArgs one = a;
  for (int32_t r = 0; r < n_queries; ++r) {
    one.q = a.q + r * q_step;
    one.out = a.out + r * out_step;
    one.n_kv = a.n_kv + r;
    paged_attention(kt, one);
  }
}

namespace scalar {

void paged_attention_span(const PagedAttentionArgs& a, int64_t begin, int64_t end,
                          const PagedPartial& part) {
  const int32_t dk = a.head_dim_k;
  const int32_t dv = a.head_dim_v;
  PagedSegment seg[2];
  const int32_t n_seg = paged_segments(a, seg);
  for (int32_t g = 0; g < a.n_group; ++g) {
    const float* q = a.q + g * a.q_stride;
    float* acc = part.acc + g * dv;
    std::fill(acc, acc + dv, 0.0f);
    float m = -INFINITY;
    float l = 0.0f;
    // Rows are decoded unrotated (kv_decode_row), so the segments share acc as it is.
    for (int32_t si = 0; si < n_seg; ++si) {
      const PagedSegment& sg = seg[si];
      // The segment's part of the span; its tiles are cut from where that part starts.
      const int64_t t_begin = std::max(sg.begin, begin);
      const int64_t t_end = std::min(sg.end, end);
      for (int64_t t0 = t_begin; t0 < t_end; t0 += kPagedTile) {
        const int32_t n = static_cast<int32_t>(std::min<int64_t>(kPagedTile, t_end - t0));
        // The tile's K and V rows decoded to F32 (kPagedTile * 2 * kMaxHeadDim floats).
        float krow[kPagedTile][kMaxHeadDim];
        float vrow[kPagedTile][kMaxHeadDim];
        for (int32_t j = 0; j < n; ++j) {
          const int64_t i = t0 - sg.begin + j;  // the token's place in its segment
          const int64_t block = sg.block_table[i / a.block_size];
          const auto row = static_cast<int32_t>(i % a.block_size);
          kv_decode_row(sg.dtypes.k, sg.k + block * sg.k_block_stride,
                        sg.k_scales + block * sg.k_scale_block_stride, dk, row, krow[j]);
          kv_decode_row(sg.dtypes.v, sg.v + block * sg.v_block_stride,
                        sg.v_scales + block * sg.v_scale_block_stride, dv, row, vrow[j]);
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
    }
    part.m[g] = m;
    part.l[g] = l;
  }
}

}  // namespace scalar
}  // namespace tokamak::cpu
