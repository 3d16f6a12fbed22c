// AVX2 + FMA + F16C paged attention (arithmetic and order in paged_attention.h). Per tile of
// up to kPagedTile tokens, while its K and V rows are in L1, for every head of the group:
//
//   1. scores: 8-lane partial dots over head_dim_k for a few (token, head) pairs at a time in
//      registers (each K load widened once for all heads), then eight tokens' partials reduced
//      together by a transposing horizontal add into one vector of eight scores;
//   2. the online-softmax step per head on those vectors (ggml's vector exp), lanes past the
//      last token masked to -inf;
//   3. values: each head's accumulator rescaled by alpha and the tile's weighted V rows added,
//      a few 8-float column chunks of a few heads at a time, in registers.
//
// Heads go in register sub-groups of at most kSub; a head's arithmetic is the same in any
// sub-group, so its result depends on nothing but its own query and the KV.
//
// Everything is templated on the dtypes of keys (DK) and values (DV): Row<D>::load decodes 8
// elements of a row in
// registers. int8 and fp8 rows are decoded without their row scale, which multiplies the
// whole dot product (K) or the softmax weight (V) instead: one multiply per token, not per
// element. q4 applies its group scales in the load, q4c its channel scales and minimums.
//
// A call with a cold segment (paged_attention.h) runs one segment after the other, each on
// its own dtypes' instantiation, through one State (m, l, acc per head).

#include <algorithm>
#include <cmath>
#include <iterator>

#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu::avx2 {
namespace {

constexpr int kSub = 4;  // heads per register sub-group

// Whether a dtype's rows carry one scale for the whole row.
constexpr bool token_scaled(KVDType d) {
  return d == KVDType::Int8 || d == KVDType::Fp8;
}

// Elements [d, d + 8) of a row of hd elements as F32. `scales`: for q4 the row's f16 group
// scales; for q4c the tile's (d_c for c in [0, hd), then m_c); unused otherwise.
template <KVDType D>
struct Row;

template <>
struct Row<KVDType::F16> {
  static __m256 load(const uint8_t* row, const uint16_t*, int32_t, int32_t d) {
    return load_f16(reinterpret_cast<const uint16_t*>(row) + d);
  }
};

template <>
struct Row<KVDType::BF16> {
  static __m256 load(const uint8_t* row, const uint16_t*, int32_t, int32_t d) {
    return load_bf16(reinterpret_cast<const uint16_t*>(row) + d);
  }
};

template <>
struct Row<KVDType::F32> {
  static __m256 load(const uint8_t* row, const uint16_t*, int32_t, int32_t d) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
};

template <>
struct Row<KVDType::Int8> {
  static __m256 load(const uint8_t* row, const uint16_t*, int32_t, int32_t d) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + d));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  }
};

// E4M3 to F16 bits: sign to bit 15, exponent and mantissa shifted up 7, which reads as the
// same number divided by 2^8 (the exponent biases are 7 and 15), subnormals included. The
// 2^8 goes into the token scale (kFp8Unbias).
constexpr float kFp8Unbias = 256.0f;

template <>
struct Row<KVDType::Fp8> {
  static __m256 load(const uint8_t* row, const uint16_t*, int32_t, int32_t d) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + d)));
    const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
    const __m128i rest = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7);
    return _mm256_cvtph_ps(_mm_or_si128(sign, rest));
  }
};

// Codes [d, d + 8) of a 4-bit row (element 2i in the low nibble of byte i), 0..15 in 8 lanes.
inline __m256i nibbles8(const uint8_t* row, int32_t d) {
  int32_t packed;
  __builtin_memcpy(&packed, row + d / 2, 4);
  const __m128i b = _mm_cvtsi32_si128(packed);
  const __m256i pairs = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(b, b));  // b0 b0 b1 b1 ...
  return _mm256_and_si256(_mm256_srlv_epi32(pairs, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                          _mm256_set1_epi32(15));
}

template <>
struct Row<KVDType::Q4> {
  static __m256 load(const uint8_t* row, const uint16_t* group_scales, int32_t, int32_t d) {
    const __m256 q = _mm256_cvtepi32_ps(_mm256_sub_epi32(nibbles8(row, d), _mm256_set1_epi32(8)));
    return _mm256_mul_ps(q, _mm256_set1_ps(half(group_scales[d / kKVQ4Group])));
  }
};

// m_c + q * d_c in one fma, the same float as kv_decode_row's multiply and add: q * d_c (a
// 4-bit integer times an 11-bit significand) is exact in F32, so only the add rounds.
template <>
struct Row<KVDType::Q4C> {
  static __m256 load(const uint8_t* row, const uint16_t* tile_scales, int32_t hd, int32_t d) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(nibbles8(row, d)), load_f16(tile_scales + d),
                           load_f16(tile_scales + hd + d));
  }
};

// The K and V rows of one tile's tokens; rows [n, n8) repeat the last one (their scores are
// computed, then masked), so the score loop needs no tail.
struct Tile {
  const uint8_t* k[kPagedTile];
  const uint8_t* v[kPagedTile];
  const uint16_t* k_groups[kPagedTile];  // q4: the row's group scales; q4c: the tile's scales
  const uint16_t* v_groups[kPagedTile];
  alignas(32) float k_scale[kPagedTile];  // int8 / fp8: the row's scale
  alignas(32) float v_scale[kPagedTile];
  int32_t n = 0;   // tokens
  int32_t n8 = 0;  // n rounded up to a multiple of 8
};

// Lane i = the sum of the 8 lanes of v[i], in a fixed tree: ((0+1) + (2+3)) + ((4+5) + (6+7)).
inline __m256 hsum_8x8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]);
  const __m256 t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]);
  const __m256 t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // lanes 0-3: v0..v3 low halves, 4-7: high halves
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // the same for v4..v7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Scores of G heads (queries q + g * q_stride) for the tile's tokens: s[g][j] for j < n, -inf
// for n <= j < n8. Decoded: the tile's rows are already F32, what Row<DK>::load gives (a
// row scale of DK's still in t.k_scale); the same for values in tile_values. TJ tokens a step keep
// G * TJ accumulators in flight (8, 8, 12, 8 registers: the fastest choices in a timing on Zen 3,
// with the query rows read from L1).
template <KVDType DK, int G, bool Decoded = false>
void tile_scores(const Tile& t, const float* q, int64_t q_stride, int32_t dk, float scale,
                 float (*s)[kPagedTile]) {
  using KRow = Row<Decoded ? KVDType::F32 : DK>;
  constexpr int TJ = G == 1 ? 8 : G == 4 ? 2 : 4;
  __m256 part[G][8];
  for (int32_t j8 = 0; j8 < t.n8; j8 += 8) {
    for (int jj = 0; jj < 8; jj += TJ) {
      __m256 acc[TJ][G];
      for (int u = 0; u < TJ; ++u) {
        for (int g = 0; g < G; ++g) acc[u][g] = _mm256_setzero_ps();
      }
      for (int32_t d = 0; d < dk; d += 8) {
        for (int u = 0; u < TJ; ++u) {
          const __m256 kv = KRow::load(t.k[j8 + jj + u], t.k_groups[j8 + jj + u], dk, d);
          for (int g = 0; g < G; ++g) {
            acc[u][g] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + g * q_stride + d), acc[u][g]);
          }
        }
      }
      for (int u = 0; u < TJ; ++u) {
        for (int g = 0; g < G; ++g) part[g][jj + u] = acc[u][g];
      }
    }
    const __m256 valid = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(t.n - j8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    __m256 vscale = _mm256_set1_ps(scale);
    if constexpr (token_scaled(DK)) {
      vscale = _mm256_mul_ps(vscale, _mm256_load_ps(t.k_scale + j8));
    }
    const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
    for (int g = 0; g < G; ++g) {
      const __m256 r = _mm256_mul_ps(hsum_8x8(part[g]), vscale);
      _mm256_storeu_ps(s[g] + j8, _mm256_blendv_ps(minus_inf, r, valid));
    }
  }
}

// The online-softmax step of one head: turns its scores s[0, n8) into weights exp(s - m'),
// updates m and l, and returns alpha = exp(m - m').
inline float softmax_step(float* s, int32_t n8, float& m, float& l) {
  __m256 mx = _mm256_loadu_ps(s);
  for (int32_t j = 8; j < n8; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + j));
  const float m_new = std::max(m, hmax(mx));
  const __m256 vm = _mm256_set1_ps(m_new);
  __m256 sum = _mm256_setzero_ps();
  for (int32_t j = 0; j < n8; j += 8) {
    const __m256 p = exp_ggml(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, p);
    sum = _mm256_add_ps(sum, p);
  }
  const float alpha = _mm256_cvtss_f32(exp_ggml(_mm256_set1_ps(m - m_new)));
  l = std::fma(l, alpha, hsum(sum));
  m = m_new;
  return alpha;
}

// acc[g][d0, d0 + 8C) = acc * alpha[g] + Σ_j p[g][j] v_j[d0, d0 + 8C), for G heads whose
// accumulator rows are dv floats (the value rows' length) apart.
template <KVDType DV, int G, int C, bool Decoded = false>
void tile_values(const Tile& t, const float (*p)[kPagedTile], const float* alpha, float* acc,
                 int32_t dv, int32_t d0) {
  using VRow = Row<Decoded ? KVDType::F32 : DV>;
  __m256 a[G][C];
  for (int g = 0; g < G; ++g) {
    const __m256 al = _mm256_set1_ps(alpha[g]);
    for (int c = 0; c < C; ++c) {
      a[g][c] = _mm256_mul_ps(_mm256_loadu_ps(acc + g * dv + d0 + 8 * c), al);
    }
  }
  for (int32_t j = 0; j < t.n; ++j) {
    __m256 pj[G];
    for (int g = 0; g < G; ++g) {
      pj[g] = _mm256_set1_ps(token_scaled(DV) ? p[g][j] * t.v_scale[j] : p[g][j]);
    }
    for (int c = 0; c < C; ++c) {
      const __m256 vv = VRow::load(t.v[j], t.v_groups[j], dv, d0 + 8 * c);
      for (int g = 0; g < G; ++g) a[g][c] = _mm256_fmadd_ps(pj[g], vv, a[g][c]);
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + g * dv + d0 + 8 * c, a[g][c]);
  }
}

// C column chunks per pass: G * C accumulators (8, 8, 12, 8 registers), chosen as above.
template <KVDType DV, int G, bool Decoded = false>
void tile_values_all(const Tile& t, const float (*p)[kPagedTile], const float* alpha, float* acc,
                     int32_t dv) {
  constexpr int C = G == 1 ? 8 : G == 4 ? 2 : 4;
  int32_t d0 = 0;
  for (; d0 + 8 * C <= dv; d0 += 8 * C) tile_values<DV, G, C, Decoded>(t, p, alpha, acc, dv, d0);
  for (; d0 < dv; d0 += 8) tile_values<DV, G, 1, Decoded>(t, p, alpha, acc, dv, d0);
}

template <KVDType DK, KVDType DV, int G, bool Decoded = false>
void tile_step(const Tile& t, const PagedAttentionArgs& a, int64_t t0, int32_t g0,
               float (*s)[kPagedTile], float* m, float* l, float* acc) {
  tile_scores<DK, G, Decoded>(t, a.q + g0 * a.q_stride, a.q_stride, a.head_dim_k, a.scale, s + g0);
  if (a.scores != nullptr) {
    for (int g = 0; g < G; ++g) {
      std::copy(s[g0 + g], s[g0 + g] + t.n, a.scores + (g0 + g) * a.scores_stride + t0);
    }
  }
  float alpha[G];
  for (int g = 0; g < G; ++g) alpha[g] = softmax_step(s[g0 + g], t.n8, m[g0 + g], l[g0 + g]);
  tile_values_all<DV, G, Decoded>(t, s + g0, alpha, acc + g0 * a.head_dim_v, a.head_dim_v);
}

// tile_step for each register sub-group of the call's heads.
template <KVDType DK, KVDType DV, bool Decoded = false>
void tile_step_heads(const Tile& t, const PagedAttentionArgs& a, int64_t t0, float (*s)[kPagedTile],
                     float* m, float* l, float* acc) {
  for (int32_t g0 = 0; g0 < a.n_group; g0 += kSub) {
    switch (std::min(kSub, a.n_group - g0)) {
      case 1:
        tile_step<DK, DV, 1, Decoded>(t, a, t0, g0, s, m, l, acc);
        break;
      case 2:
        tile_step<DK, DV, 2, Decoded>(t, a, t0, g0, s, m, l, acc);
        break;
      case 3:
        tile_step<DK, DV, 3, Decoded>(t, a, t0, g0, s, m, l, acc);
        break;
      default:
        tile_step<DK, DV, 4, Decoded>(t, a, t0, g0, s, m, l, acc);
        break;
    }
  }
}

// The tile's row pointers and scales, from token t0 of the segment on (block index `block`
// into its table, row `offset` in that block); advances block and offset past the tile.
template <KVDType DK, KVDType DV>
void gather_tile(const PagedAttentionArgs& a, const PagedSegment& sg, int64_t t0, int64_t& block,
                 int32_t& offset, Tile& t) {
  const int64_t k_row = static_cast<int64_t>(kv_row_bytes(DK, a.head_dim_k));
  const int64_t v_row = static_cast<int64_t>(kv_row_bytes(DV, a.head_dim_v));
  t.n = static_cast<int32_t>(std::min<int64_t>(kPagedTile, sg.end - t0));
  t.n8 = (t.n + 7) / 8 * 8;
  for (int32_t j = 0; j < t.n; ++j) {
    const int64_t b = sg.block_table[block];
    t.k[j] = sg.k + b * sg.k_block_stride + offset * k_row;
    t.v[j] = sg.v + b * sg.v_block_stride + offset * v_row;
    const auto* k_scales =
        reinterpret_cast<const uint16_t*>(sg.k_scales + b * sg.k_scale_block_stride);
    const auto* v_scales =
        reinterpret_cast<const uint16_t*>(sg.v_scales + b * sg.v_scale_block_stride);
    if constexpr (token_scaled(DK)) {
      t.k_scale[j] = half(k_scales[offset]) * (DK == KVDType::Fp8 ? kFp8Unbias : 1.0f);
    }
    if constexpr (token_scaled(DV)) {
      t.v_scale[j] = half(v_scales[offset]) * (DV == KVDType::Fp8 ? kFp8Unbias : 1.0f);
    }
    if constexpr (DK == KVDType::Q4)
      t.k_groups[j] = k_scales + offset * (a.head_dim_k / kKVQ4Group);
    if constexpr (DV == KVDType::Q4)
      t.v_groups[j] = v_scales + offset * (a.head_dim_v / kKVQ4Group);
    if constexpr (DK == KVDType::Q4C) t.k_groups[j] = k_scales;
    if constexpr (DV == KVDType::Q4C) t.v_groups[j] = v_scales;
    if (++offset == a.block_size) {
      offset = 0;
      ++block;
    }
  }
  for (int32_t j = t.n; j < t.n8; ++j) {
    t.k[j] = t.k[t.n - 1];
    t.v[j] = t.v[t.n - 1];
    t.k_groups[j] = t.k_groups[t.n - 1];
    t.v_groups[j] = t.v_groups[t.n - 1];
    t.k_scale[j] = t.k_scale[t.n - 1];
    t.v_scale[j] = t.v_scale[t.n - 1];
  }
}

// The online softmax's state per head of the call, carried from one segment to the next:
// running max, running sum and accumulator row.
struct State {
  float m[kMaxGroup];
  float l[kMaxGroup];
  alignas(32) float acc[kMaxGroup * kMaxHeadDim];  // (n_group, head_dim_v)
  // Whether acc holds the hadamard32 rotation of each group of 32 (after a segment of q4
  // values, whose rows are stored rotated: it sums p Hv = H sum p v, kv_codec.h).
  bool rotated = false;
};

// Brings the accumulator to the rotated form or back (hadamard32 is its own inverse, and
// linear, so the later alpha rescaling commutes with it).
void set_rotated(const PagedAttentionArgs& a, State& st, bool rotated) {
  if (st.rotated == rotated) return;
  for (int32_t g = 0; g < a.n_group; ++g) {
    for (int32_t d = 0; d < a.head_dim_v; d += kKVQ4Group) {
      hadamard32(st.acc + g * a.head_dim_v + d);
    }
  }
  st.rotated = rotated;
}

// The tiles of tokens [begin, end) of one segment, cut from begin, added to the state.
template <KVDType DK, KVDType DV>
void segment_as(const PagedAttentionArgs& a_in, const PagedSegment& whole, int64_t begin,
                int64_t end, State& st) {
  // q4 rows are stored Hadamard-rotated (kv_codec.h): rotate the queries here (q4 keys), and
  // the accumulator (q4 values), instead of every key and value.
  alignas(32) float q_rot[DK == KVDType::Q4 ? kMaxGroup * kMaxHeadDim : 1];
  PagedAttentionArgs a = a_in;
  if constexpr (DK == KVDType::Q4) {
    for (int32_t g = 0; g < a.n_group; ++g) {
      float* row = q_rot + g * a.head_dim_k;
      std::copy(a_in.q + g * a_in.q_stride, a_in.q + g * a_in.q_stride + a.head_dim_k, row);
      for (int32_t d = 0; d < a.head_dim_k; d += kKVQ4Group) hadamard32(row + d);
    }
    a.q = q_rot;
    a.q_stride = a.head_dim_k;
  }
  set_rotated(a, st, DV == KVDType::Q4);
  alignas(32) float s[kMaxGroup][kPagedTile];  // the tile's scores, then its weights

  Tile t;
  std::fill(std::begin(t.k_groups), std::end(t.k_groups), nullptr);
  std::fill(std::begin(t.v_groups), std::end(t.v_groups), nullptr);
  std::fill(std::begin(t.k_scale), std::end(t.k_scale), 1.0f);
  std::fill(std::begin(t.v_scale), std::end(t.v_scale), 1.0f);
  PagedSegment sg = whole;  // ends at `end`: the tiles stop there
  sg.end = end;
  int64_t block = (begin - sg.begin) / a.block_size;  // index into the block table of token t0
  auto offset = static_cast<int32_t>((begin - sg.begin) % a.block_size);  // its row there
  for (int64_t t0 = begin; t0 < sg.end; t0 += kPagedTile) {
    gather_tile<DK, DV>(a, sg, t0, block, offset, t);
    if (t0 + kPagedTile < sg.end) paged_prefetch_tile(a, sg, t0 + kPagedTile, block, offset);
    tile_step_heads<DK, DV>(t, a, t0, s, st.m, st.l, st.acc);
  }
}

using SegmentFn = void (*)(const PagedAttentionArgs&, const PagedSegment&, int64_t, int64_t,
                           State&);

// The instantiation for a segment's dtypes: every dtype for both, and the mixes worth having
// (keys kept finer than values; q4c keys, which are for cold blocks, beside the values such
// blocks keep); nullptr for the others, which run on the scalar kernel.
SegmentFn segment_kernel(KVDTypes d) {
  using K = KVDType;
  if (d.k == d.v) {
    switch (d.k) {
      case K::F16:
        return segment_as<K::F16, K::F16>;
      case K::BF16:
        return segment_as<K::BF16, K::BF16>;
      case K::F32:
        return segment_as<K::F32, K::F32>;
      case K::Int8:
        return segment_as<K::Int8, K::Int8>;
      case K::Fp8:
        return segment_as<K::Fp8, K::Fp8>;
      case K::Q4:
        return segment_as<K::Q4, K::Q4>;
      case K::Q4C:  // per-channel values buy nothing (values cost nothing in q4)
        return nullptr;
    }
  }
  if (d == KVDTypes(K::F16, K::Int8)) return segment_as<K::F16, K::Int8>;
  if (d == KVDTypes(K::F16, K::Fp8)) return segment_as<K::F16, K::Fp8>;
  if (d == KVDTypes(K::F16, K::Q4)) return segment_as<K::F16, K::Q4>;
  if (d == KVDTypes(K::Int8, K::Q4)) return segment_as<K::Int8, K::Q4>;
  if (d == KVDTypes(K::Fp8, K::Q4)) return segment_as<K::Fp8, K::Q4>;
  if (d == KVDTypes(K::Int8, K::Fp8)) return segment_as<K::Int8, K::Fp8>;
  if (d == KVDTypes(K::Q4C, K::F16)) return segment_as<K::Q4C, K::F16>;
  if (d == KVDTypes(K::Q4C, K::Int8)) return segment_as<K::Q4C, K::Int8>;
  if (d == KVDTypes(K::Q4C, K::Q4)) return segment_as<K::Q4C, K::Q4>;
  return nullptr;
}

// ---- Several queries of one sequence (paged_attention_queries) ------------------------------
//
// A prefill chunk's queries read the same K/V tiles, each over its own causal length. This
// walks the longest query's spans and tiles once, decodes each tile's rows once into F32 rows
// as Row<D>::load gives them (row scales of int8 and fp8 kept apart in the tile, as the
// kernels above apply them), and runs every query that has tokens in the tile through
// tile_step on them, with that query's own tile length. A query's spans, tiles, merges and
// arithmetic are those of its own paged_attention call; only the memory traffic is shared.
// Not for q4 and q4c, whose rows need group scales and rotations in the load.

// Query states per call: queries * n_group * head_dim_v floats of each of the span's and the
// merged accumulators, on the stack.
constexpr int32_t kQueryStateFloats = 4096;
constexpr int32_t kMaxBlockQueries = 8;

// The state of one query: its current span's (m, l, acc) and the merge of its earlier spans.
struct QueryState {
  float m[kMaxGroup];
  float l[kMaxGroup];
  float merged_m[kMaxGroup];
  float merged_l[kMaxGroup];
  float* acc = nullptr;
  float* merged_acc = nullptr;
};

// Rows [n, n8) of t repeat row n - 1: the tile of a query whose last tokens end inside it.
void cut_tile(Tile& t, int32_t n) {
  t.n = n;
  t.n8 = (n + 7) / 8 * 8;
  for (int32_t j = n; j < t.n8; ++j) {
    t.k[j] = t.k[n - 1];
    t.v[j] = t.v[n - 1];
    t.k_scale[j] = t.k_scale[n - 1];
    t.v_scale[j] = t.v_scale[n - 1];
  }
}

template <KVDType DK, KVDType DV>
void queries_as(const PagedAttentionArgs& a, int32_t n_queries, int64_t q_step, int64_t out_step) {
  const int32_t dk = a.head_dim_k;
  const int32_t dv = a.head_dim_v;
  const int32_t ng = a.n_group;
  alignas(32) float acc_floats[2 * kQueryStateFloats];
  QueryState st[kMaxBlockQueries];
  PagedAttentionArgs qa[kMaxBlockQueries];  // each query's own call
  for (int32_t r = 0; r < n_queries; ++r) {
    st[r].acc = acc_floats + r * ng * dv;
    st[r].merged_acc = acc_floats + kQueryStateFloats + r * ng * dv;
    qa[r] = a;
    qa[r].q = a.q + r * q_step;
    qa[r].out = a.out + r * out_step;
    qa[r].n_kv = a.n_kv + r;
  }
  // The tile decoded to F32, rows dk (keys) and dv (values) floats apart.
  alignas(32) float kf[kPagedTile * kMaxQueriesHeadDim];
  alignas(32) float vf[kPagedTile * kMaxQueriesHeadDim];
  alignas(32) float s[kMaxGroup][kPagedTile];

  Tile t;  // the tile's rows in the pool
  std::fill(std::begin(t.k_groups), std::end(t.k_groups), nullptr);
  std::fill(std::begin(t.v_groups), std::end(t.v_groups), nullptr);
  std::fill(std::begin(t.k_scale), std::end(t.k_scale), 1.0f);
  std::fill(std::begin(t.v_scale), std::end(t.v_scale), 1.0f);
  Tile ft = t;  // the same rows in kf / vf

  const int64_t n_kv_last = a.n_kv + n_queries - 1;
  PagedSegment sg;
  static_cast<PagedPool&>(sg) = static_cast<const PagedPool&>(a);
  sg.begin = 0;
  for (int64_t span = 0; span < paged_spans(n_kv_last); ++span) {
    const int64_t b = span * kPagedSpan;
    sg.end = std::min(n_kv_last, b + kPagedSpan);
    // Queries [r0, n_queries) have tokens in this span; query r's part of it ends at e_r.
    const auto r0 = static_cast<int32_t>(std::max<int64_t>(0, b - a.n_kv + 1));
    for (int32_t r = r0; r < n_queries; ++r) {
      std::fill(st[r].m, st[r].m + ng, -INFINITY);
      std::fill(st[r].l, st[r].l + ng, 0.0f);
      std::fill(st[r].acc, st[r].acc + ng * dv, 0.0f);
    }
    int64_t block = b / a.block_size;
    auto offset = static_cast<int32_t>(b % a.block_size);
    for (int64_t t0 = b; t0 < sg.end; t0 += kPagedTile) {
      gather_tile<DK, DV>(a, sg, t0, block, offset, t);
      if (t0 + kPagedTile < sg.end) paged_prefetch_tile(a, sg, t0 + kPagedTile, block, offset);
      for (int32_t j = 0; j < t.n; ++j) {
        for (int32_t d = 0; d < dk; d += 8) {
          _mm256_store_ps(kf + j * dk + d, Row<DK>::load(t.k[j], nullptr, dk, d));
        }
        for (int32_t d = 0; d < dv; d += 8) {
          _mm256_store_ps(vf + j * dv + d, Row<DV>::load(t.v[j], nullptr, dv, d));
        }
      }
      for (int32_t j = 0; j < kPagedTile; ++j) {
        ft.k[j] = reinterpret_cast<const uint8_t*>(kf + j * dk);
        ft.v[j] = reinterpret_cast<const uint8_t*>(vf + j * dv);
      }
      std::copy(std::begin(t.k_scale), std::end(t.k_scale), std::begin(ft.k_scale));
      std::copy(std::begin(t.v_scale), std::end(t.v_scale), std::begin(ft.v_scale));
      cut_tile(ft, t.n);
      for (int32_t r = r0; r < n_queries; ++r) {
        const int64_t e_r = std::min(qa[r].n_kv, b + kPagedSpan);
        if (e_r <= t0) continue;  // query r's span ended before this tile
        const auto n_r = static_cast<int32_t>(std::min<int64_t>(kPagedTile, e_r - t0));
        Tile cut;
        const Tile* tr = &ft;
        if (n_r < ft.n) {
          cut = ft;
          cut_tile(cut, n_r);
          tr = &cut;
        }
        tile_step_heads<DK, DV, true>(*tr, qa[r], t0, s, st[r].m, st[r].l, st[r].acc);
      }
    }
    // Each query's span into its merged state, as paged_attention merges a call's spans.
    for (int32_t r = r0; r < n_queries; ++r) {
      const PagedPartial merged{st[r].merged_m, st[r].merged_l, st[r].merged_acc};
      if (span == 0) {
        std::copy(st[r].m, st[r].m + ng, merged.m);
        std::copy(st[r].l, st[r].l + ng, merged.l);
        std::copy(st[r].acc, st[r].acc + ng * dv, merged.acc);
      } else {
        paged_merge(merged, PagedPartial{st[r].m, st[r].l, st[r].acc}, ng, dv);
      }
    }
  }
  for (int32_t r = 0; r < n_queries; ++r) {
    const PagedPartial merged{st[r].merged_m, st[r].merged_l, st[r].merged_acc};
    paged_finish(qa[r], &merged, 1);
  }
}

}  // namespace

bool paged_attention_queries(const PagedAttentionArgs& a, int32_t n_queries, int64_t q_step,
                             int64_t out_step) {
  const bool dims = a.head_dim_k % 8 == 0 && a.head_dim_v % 8 == 0 &&
                    a.head_dim_k <= kMaxQueriesHeadDim && a.head_dim_v <= kMaxQueriesHeadDim;
  if (!dims || a.n_cold != 0 || a.scores != nullptr) return false;
  using K = KVDType;
  using QueriesFn = void (*)(const PagedAttentionArgs&, int32_t, int64_t, int64_t);
  QueriesFn fn = nullptr;
  // The instantiations of segment_kernel without q4 or q4c.
  if (a.dtypes == KVDTypes(K::F16, K::F16)) fn = queries_as<K::F16, K::F16>;
  if (a.dtypes == KVDTypes(K::BF16, K::BF16)) fn = queries_as<K::BF16, K::BF16>;
  if (a.dtypes == KVDTypes(K::F32, K::F32)) fn = queries_as<K::F32, K::F32>;
  if (a.dtypes == KVDTypes(K::Int8, K::Int8)) fn = queries_as<K::Int8, K::Int8>;
  if (a.dtypes == KVDTypes(K::Fp8, K::Fp8)) fn = queries_as<K::Fp8, K::Fp8>;
  if (a.dtypes == KVDTypes(K::F16, K::Int8)) fn = queries_as<K::F16, K::Int8>;
  if (a.dtypes == KVDTypes(K::F16, K::Fp8)) fn = queries_as<K::F16, K::Fp8>;
  if (a.dtypes == KVDTypes(K::Int8, K::Fp8)) fn = queries_as<K::Int8, K::Fp8>;
  if (fn == nullptr) return false;
  const int64_t per_query = int64_t{a.n_group} * a.head_dim_v;
  for (int32_t r0 = 0; r0 < n_queries;) {
    // As many queries a pass as the stack states hold.
    const auto n = static_cast<int32_t>(std::min<int64_t>(
        {int64_t{n_queries - r0}, kMaxBlockQueries, kQueryStateFloats / per_query}));
    PagedAttentionArgs first = a;
    first.q = a.q + r0 * q_step;
    first.out = a.out + r0 * out_step;
    first.n_kv = a.n_kv + r0;
    fn(first, n, q_step, out_step);
    r0 += n;
  }
  return true;
}

void paged_attention_span(const PagedAttentionArgs& a, int64_t begin, int64_t end,
                          const PagedPartial& out) {
  if (a.head_dim_k % 8 != 0 || a.head_dim_v % 8 != 0) {
    scalar::paged_attention_span(a, begin, end, out);
    return;
  }
  // Both segments here or both on the scalar kernel, whichever the span: the arithmetic of a
  // call is one kernel's.
  PagedSegment seg[2];
  const int32_t n_seg = paged_segments(a, seg);
  SegmentFn fn[2] = {};
  for (int32_t i = 0; i < n_seg; ++i) {
    fn[i] = segment_kernel(seg[i].dtypes);
    if (fn[i] == nullptr) {
      scalar::paged_attention_span(a, begin, end, out);
      return;
    }
  }
  const int32_t dv = a.head_dim_v;
  State st;
  std::fill(st.m, st.m + a.n_group, -INFINITY);
  std::fill(st.l, st.l + a.n_group, 0.0f);
  std::fill(st.acc, st.acc + a.n_group * dv, 0.0f);
  for (int32_t i = 0; i < n_seg; ++i) {
    const int64_t b = std::max(seg[i].begin, begin);
    const int64_t e = std::min(seg[i].end, end);
    if (b < e) fn[i](a, seg[i], b, e, st);
  }
  set_rotated(a, st, false);
  std::copy(st.m, st.m + a.n_group, out.m);
  std::copy(st.l, st.l + a.n_group, out.l);
  std::copy(st.acc, st.acc + a.n_group * dv, out.acc);
}

}  // namespace tokamak::cpu::avx2
