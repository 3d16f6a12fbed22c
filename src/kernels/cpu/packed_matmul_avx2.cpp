// The packed matmul (packed_weights.h) with AVX2, for CPUs without AVX-512 VNNI (AMD Zen 2
// and 3, Intel Haswell to Comet Lake; AVX-VNNI, where a CPU has it, is not used yet). The lanes are weight rows, as in
// packed_matmul_avx512.cpp: a 32-byte chunk of a group holds four elements of each of its
// eight rows, multiplied by the same four activation quants broadcast to every lane. AVX2 has
// no vpdpbusd; vpmaddubsw multiplies unsigned weight bytes by signed activation bytes and adds
// neighbouring pairs into 16 bits, vpmaddwd against ones then adds the pairs into a lane's 32
// bits. In GGUF's layout (kernels_avx2.cpp) a row's block fills a register instead and needs
// its own int-to-float conversion and fma per activation row; here one of each serves eight
// rows.
//
// The integer sum of a block is exact however it is formed, and the float steps are those of
// packed_matmul_reference in the same order, so results are bitwise the AVX-512 kernels'
// (and the reference's):
//   4-bit: a product is at most 15 * 128, a 16-bit pair sum of one maddubs at most 3,840, and
//          a block's eight maddubs (four chunks, low and high nibbles) add up to at most
//          30,720 per 16-bit lane: no saturation, so the 16-bit sums are added first and
//          widened once per block.
//   8-bit: stored as q + 128 (for vpdpbusd), which maddubs would saturate: each chunk is
//          turned back into q, multiplied as |q| by x with q's sign (at most 127 * 127 * 2 per
//          pair, the activation quantizers give |x| <= 127) and widened at once.
// Q4_1's min term, a float chain over the blocks, runs inside the block loop for tiles of up
// to four activation rows and after it for larger ones, whose accumulators already fill AVX2's
// 16 registers (same order, same bits either way).
//
// This file is compiled with the AVX2 flags and only called on CPUs that have them.

#include "kernels/cpu/packed_matmul_avx2.h"

#include <immintrin.h>

#include <cassert>

#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu::avx2 {
namespace {

using ActBlock = PackedActBlock;

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m256 halves(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Four activation quants in every 32-bit lane.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

struct Q4_0Policy {
  using W = block_q4_0x8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr bool kNibbles = true;
  static constexpr bool kHalfScales = false;
  static constexpr DType kPacked = DType::Q4_0_X8;
};
struct Q4_1Policy {
  using W = block_q4_1x8;
  using X = block_q8_1;
  static constexpr bool kMins = true;
  static constexpr bool kNibbles = true;
  static constexpr bool kHalfScales = false;
  static constexpr DType kPacked = DType::Q4_1_X8;
};
struct Q8_0Policy {
  using W = block_q8_0x8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr bool kNibbles = false;
  static constexpr bool kHalfScales = false;
  static constexpr DType kPacked = DType::Q8_0_X8;
};
// Q6_K's values as 8-bit quants, each half of a block (chunks 0-3, 4-7) with its own integer
// scale per row.
struct Q6_KPolicy {
  using W = block_q6_kx8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr bool kNibbles = false;
  static constexpr bool kHalfScales = true;
  static constexpr DType kPacked = DType::Q6_K_X8;
};

// The block's integer sum from its halves' sums, a lane per weight row: sc[r] * first +
// sc[8 + r] * second (exact: |sc| <= 128, each half at most 16 * 127 * 128 in magnitude).
template <typename T>
inline __m256i scaled_halves(const typename T::W& b, __m256i first, __m256i second) {
  const __m256i sc0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.sc)));
  const __m256i sc1 =
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.sc + kPackRows)));
  return _mm256_add_epi32(_mm256_mullo_epi32(sc0, first), _mm256_mullo_epi32(sc1, second));
}

// How far ahead of the block in use the weights are prefetched: as in the AVX-512 kernel, one
// sequential stream per core does not keep enough reads in flight for a decode step.
constexpr int kPrefetchBytes = 4096;

// A block of one group, decoded for vpmaddubsw, and its integer sums against a block of
// activation quants, a lane per weight row: for Q4_0 and Q8_0 the value the reference's isum
// has but Q4_0's bias (added by the caller), for Q4_1 the plain products.
template <typename T>
struct BlockQuants;

template <typename T>
requires T::kNibbles struct BlockQuants<T> {
  __m256i lo[4];
  __m256i hi[4];
  explicit BlockQuants(const typename T::W& b) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      const __m256i raw = load32(b.qs + 32 * s);
      lo[s] = _mm256_and_si256(raw, mask);                        // elements 8s .. 8s+3
      hi[s] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);  // elements 8s+4 .. 8s+7
    }
  }
  __m256i sum(const int8_t* xq) const {
    __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[s], broadcast4(xq + 8 * s)));
      p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[s], broadcast4(xq + 8 * s + 4)));
    }
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
  }
};

// An 8-bit chunk's products with four activation quants at x4, widened to a lane per weight
// row: q the signed quants, aq their magnitudes.
inline __m256i q8_chunk_sum(__m256i aq, __m256i q, const int8_t* x4) {
  const __m256i pairs = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(broadcast4(x4), q));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <typename T>
requires(!T::kNibbles) struct BlockQuants<T> {
  __m256i q[8];   // the signed quants
  __m256i aq[8];  // their magnitudes
  const typename T::W& block;
  explicit BlockQuants(const typename T::W& b) : block(b) {
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      q[s] = _mm256_xor_si256(load32(b.qs + 32 * s), offset);
      aq[s] = _mm256_abs_epi8(q[s]);
    }
  }
  __m256i sum(const int8_t* xq) const {
    __m256i p = _mm256_setzero_si256();
    if constexpr (T::kHalfScales) {
      __m256i first = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s)
        first = _mm256_add_epi32(first, q8_chunk_sum(aq[s], q[s], xq + 4 * s));
#pragma GCC unroll 4
      for (int s = 4; s < 8; ++s) p = _mm256_add_epi32(p, q8_chunk_sum(aq[s], q[s], xq + 4 * s));
      return scaled_halves<T>(block, first, p);
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) p = _mm256_add_epi32(p, q8_chunk_sum(aq[s], q[s], xq + 4 * s));
    return p;
  }
};

// 8-bit blocks against at most this many activation rows are decoded a chunk at a time, where
// they are used: decoded whole (BlockQuants), a block holds 16 registers, which for few rows
// GCC kept on the stack, storing and reloading every chunk of a decode step's GEMV.
constexpr int kStreamedRows = 4;

// Q8_0's integer sums of block b against rows xq[0..R), chunk by chunk (exact, so the same
// values as BlockQuants::sum).
template <typename T, int R>
inline void streamed_q8_sums(const typename T::W& b, const int8_t* const* xq, __m256i* p) {
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i first[R];
#pragma GCC unroll 4
  for (int c = 0; c < R; ++c) p[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    if (T::kHalfScales && s == 4) {
#pragma GCC unroll 4
      for (int c = 0; c < R; ++c) {
        first[c] = p[c];
        p[c] = _mm256_setzero_si256();
      }
    }
    const __m256i q = _mm256_xor_si256(load32(b.qs + 32 * s), offset);
    const __m256i aq = _mm256_abs_epi8(q);
#pragma GCC unroll 4
    for (int c = 0; c < R; ++c) p[c] = _mm256_add_epi32(p[c], q8_chunk_sum(aq, q, xq[c] + 4 * s));
  }
  if constexpr (T::kHalfScales) {
#pragma GCC unroll 4
    for (int c = 0; c < R; ++c) p[c] = scaled_halves<T>(b, first[c], p[c]);
  }
}

// Activation rows x[0..R) against the blocks w[0..nb) of one group: out[c] holds row c's
// results, a lane per weight row.
template <typename T, int R>
inline void tile(const typename T::W* w, int64_t nb, const typename T::X* const* x,
                 const ActBlock* const* act, __m256* out) {
  // Q4_1's min term in the block loop while registers allow, else in a pass of its own.
  constexpr bool kMinsInLoop = T::kMins && R <= 4;
  __m256 acc[R];
  __m256 mins[R];
#pragma GCC unroll 8
  for (int c = 0; c < R; ++c) acc[c] = mins[c] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = w[i];
    const char* ahead = reinterpret_cast<const char*>(&b) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(b); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    const __m256 dw = halves(b.d);
    // Row c's integer sum p of this block into its accumulators.
    const auto accumulate = [&](int c, __m256i p) {
      const ActBlock& ab = act[c][i];
      if constexpr (T::kNibbles && !T::kMins) p = _mm256_add_epi32(p, _mm256_set1_epi32(ab.bias));
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(ab.d));
      acc[c] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[c]);
    };
    if constexpr (!T::kNibbles && R <= kStreamedRows) {
      const int8_t* xq[R];
      for (int c = 0; c < R; ++c) xq[c] = x[c][i].qs;
      __m256i p[R];
      streamed_q8_sums<T, R>(b, xq, p);
#pragma GCC unroll 4
      for (int c = 0; c < R; ++c) accumulate(c, p[c]);
    } else {
      const BlockQuants<T> quants(b);
      __m256 mw = _mm256_setzero_ps();
      if constexpr (kMinsInLoop) mw = halves(b.m);
#pragma GCC unroll 8
      for (int c = 0; c < R; ++c) {
        if constexpr (kMinsInLoop) {
          mins[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(act[c][i].s), mins[c]);
        }
        accumulate(c, quants.sum(x[c][i].qs));
      }
    }
  }
  if constexpr (T::kMins && !kMinsInLoop) {
    // Blocks outer, rows inner: each row's chain still runs over the blocks in order, but the
    // R chains advance side by side (one after the other, each waited on its fma's latency
    // every block: ~13% of the samples of a 32-row Q4_1 matmul), and a block's mins are
    // widened once instead of once per row.
    for (int64_t i = 0; i < nb; ++i) {
      const __m256 mw = halves(w[i].m);
#pragma GCC unroll 8
      for (int c = 0; c < R; ++c) {
        mins[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(act[c][i].s), mins[c]);
      }
    }
  }
  if constexpr (T::kMins) {
#pragma GCC unroll 8
    for (int c = 0; c < R; ++c) acc[c] = _mm256_add_ps(acc[c], mins[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < R; ++c) out[c] = acc[c];
}

// Activation rows of a tile. Eight: the float accumulators spill to the stack (a load and a
// store per row and block), but each decoded block serves more rows; on the Zen 3 guest 8
// rows ran the default model's m = 32 and m = 128 shapes ~5% faster than 4, and two groups
// side by side sharing each activation broadcast (the AVX-512 kernel's pairs) ~20-90% slower,
// their 16 decoded chunks spilling.
constexpr int kTileRows = 8;

template <typename T>
void packed_matmul(const PackedMatmulArgs& a) {
  using W = typename T::W;
  using X = typename T::X;
  assert(a.k % kQK == 0);
  const int64_t nb = a.k / kQK;
  const ActBlock* acts = activation_blocks_of(T::kPacked, a);
  const auto x_row = [&](int64_t c) { return activation_row<X>(a, c); };
  const auto* w = static_cast<const W*>(a.w);
  // A gated pair's up group follows its gate group (pack_gated_pairs).
  const bool gated = a.epilogue == PackedEpilogue::SiluMul;
  assert(!gated || a.silu_mul != nullptr);
  const int64_t group_blocks = gated ? 2 * nb : nb;
  // Stores a group's results v for activation row c (gated: v the gate's, up the up's).
  const auto store = [&](int64_t g, int64_t c, __m256 v, __m256 up) {
    const int64_t j0 = g * kPackRows;
    const int64_t rows = a.n - j0 < kPackRows ? a.n - j0 : kPackRows;
    float* const dst = a.y + (j0 - a.y_origin) + c * a.y_stride;
    alignas(32) float lanes[kPackRows];
    if (gated) {
      if (rows == kPackRows) {
        _mm256_storeu_ps(dst, silu_mul8(v, up));
        return;
      }
      // A partial group through the table's silu_mul, whose tail is libm's exp (bitwise
      // what a silu_mul after the matmul gives).
      alignas(32) float up8[kPackRows];
      _mm256_store_ps(lanes, v);
      _mm256_store_ps(up8, up);
      a.silu_mul(lanes, up8, dst, rows);
      return;
    }
    if (a.epilogue == PackedEpilogue::Add) {
      if (rows == kPackRows) {
        _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), v));
        return;
      }
      _mm256_store_ps(lanes, v);
      for (int64_t r = 0; r < rows; ++r) dst[r] += lanes[r];
      return;
    }
    if (rows == kPackRows) {
      _mm256_storeu_ps(dst, v);
      return;
    }
    _mm256_store_ps(lanes, v);
    for (int64_t r = 0; r < rows; ++r) dst[r] = lanes[r];
  };
  for (int64_t g = a.g0; g < a.g1; ++g) {
    const W* const wg = w + g * group_blocks;
    const auto run_tile = [&]<int R>(int64_t c) {
      const X* xs[R];
      const ActBlock* as[R];
      for (int t = 0; t < R; ++t) {
        xs[t] = x_row(c + t);
        as[t] = acts + (c + t) * nb;
      }
      __m256 out[R];
      __m256 up[R];
      tile<T, R>(wg, nb, xs, as, out);
      if (gated) tile<T, R>(wg + nb, nb, xs, as, up);
      for (int t = 0; t < R; ++t) store(g, c + t, out[t], gated ? up[t] : out[t]);
    };
    int64_t c = 0;
    for (; c + kTileRows <= a.m; c += kTileRows) run_tile.template operator()<kTileRows>(c);
    if (c + 4 <= a.m) {
      run_tile.template operator()<4>(c);
      c += 4;
    }
    if (c + 2 <= a.m) {
      run_tile.template operator()<2>(c);
      c += 2;
    }
    if (c < a.m) run_tile.template operator()<1>(c);
  }
}

}  // namespace

void packed_matmul_q4_0(const PackedMatmulArgs& args) {
  packed_matmul<Q4_0Policy>(args);
}
void packed_matmul_q4_1(const PackedMatmulArgs& args) {
  packed_matmul<Q4_1Policy>(args);
}
void packed_matmul_q8_0(const PackedMatmulArgs& args) {
  packed_matmul<Q8_0Policy>(args);
}
void packed_matmul_q6_k(const PackedMatmulArgs& args) {
  packed_matmul<Q6_KPolicy>(args);
}

}  // namespace tokamak::cpu::avx2
