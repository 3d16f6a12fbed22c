// The packed matmul (packed_weights.h) with AVX-512 VNNI on 8-lane registers: the lanes are
// the eight weight rows of a group, so a block of 32 elements costs 8 vpdpbusd (each four
// elements of eight rows against four activation quants broadcast from memory), one
// int-to-float conversion and one fma for all eight rows, and the eight results of a group
// are stored with one instruction. 256-bit registers rather than 512: Zen 4 runs a 512-bit op
// at half the rate of a 256-bit one, and AVX-512VL's 32 registers hold a tile of 4 activation
// rows (8 decoded quant vectors, 4 accumulators, 8 integer partial sums) without spills.
//
// The 4-bit high nibbles are not shifted down: (byte & 0xf0) is 16 * q, so those products
// go to their own integer sum, shifted right by 4 once per block (exact: a multiple of 16).
// This file is compiled with the AVX-512 flags and only called on CPUs that have them; its
// helpers stay in an anonymous namespace (see kernels_avx512.cpp for why).

// GCC 12 warns inside its own AVX-512 headers (the `__Y = __Y` idiom of _mm512_undefined_*): a
// known false positive, silenced for the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cassert>
#include <cstring>
#include <vector>

#include "kernels/cpu/packed_matmul_avx512.h"

namespace tokamak::cpu::avx512 {
namespace {

// What each (activation row, block) contributes besides its quants, formed once per call.
struct ActBlock {
  float d;       // scale
  float s;       // Q8_1's d * sum(q) (Q4_1's min term), else 0
  int32_t bias;  // where the integer sum starts: -kBias * sum(q)
};

inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

// Four activation quants as one int32, broadcast to 8 lanes (folded into vpdpbusd's memory
// operand by the compiler).
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// A policy per packed type: W and X the weight and activation blocks, kMins for Q4_1's min
// term, kBias: the integer sum of a block starts at -kBias * sum(activation quants) (weights
// stored unsigned with that offset), kNibbles for the 4-bit layouts.
struct Q4_0Policy {
  using W = block_q4_0x8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr int kBias = 8;
  static constexpr bool kNibbles = true;
};
struct Q4_1Policy {
  using W = block_q4_1x8;
  using X = block_q8_1;
  static constexpr bool kMins = true;
  static constexpr int kBias = 0;
  static constexpr bool kNibbles = true;
};
struct Q8_0Policy {
  using W = block_q8_0x8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr int kBias = 128;
  static constexpr bool kNibbles = false;
};

template <typename T>
void prepare_activations(const PackedMatmulArgs& a, int64_t nb, ActBlock* out) {
  for (int64_t c = 0; c < a.m; ++c) {
    const auto* x = reinterpret_cast<const typename T::X*>(static_cast<const uint8_t*>(a.xq) +
                                                           static_cast<size_t>(c) * a.xq_stride);
    for (int64_t i = 0; i < nb; ++i) {
      ActBlock& ab = out[c * nb + i];
      ab.d = half_to_float(x[i].d);
      if constexpr (T::kMins) {
        ab.s = half_to_float(x[i].s);
      } else {
        ab.s = 0.0f;
      }
      int32_t sum = 0;
      for (int e = 0; e < kQK; ++e) sum += x[i].qs[e];
      ab.bias = -T::kBias * sum;
    }
  }
}

// How far ahead of the block in use the weights are prefetched (a group's blocks are
// contiguous, and so are the groups of a thread's share). A decode step streams each weight
// once from DRAM, and one sequential stream per core does not keep enough reads in flight on
// its own: on the 2-vCPU Zen 4 guest 4 KiB ahead took the 1B shape's ffn_up GEMV from ~0.6 to
// ~0.9 of the two-thread read ceiling (kernels bench, medians of 5; 1 KiB and 2 KiB in between).
constexpr int kPrefetchBytes = 4096;

// Activation rows x[0..R) against one group's blocks wb[0..nb): out[c] holds the eight rows.
template <typename T, int R>
inline void group_tile(const typename T::W* wb, int64_t nb, const typename T::X* const* x,
                       const ActBlock* const* act, __m256* out) {
  __m256 acc[R];
  __m256 mins[R];
#pragma GCC unroll 4
  for (int c = 0; c < R; ++c) {
    acc[c] = _mm256_setzero_ps();
    mins[c] = _mm256_setzero_ps();
  }
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i high = _mm256_set1_epi8(static_cast<char>(0xf0));
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = wb[i];
    // A block is 144-272 bytes: every cache line of the one kPrefetchBytes ahead.
    const char* ahead = reinterpret_cast<const char*>(&b) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(b); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    __m256i q[8];
    if constexpr (T::kNibbles) {
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m256i raw = load32(b.qs + 32 * s);
        q[2 * s] = _mm256_and_si256(raw, low);       // elements 8s .. 8s+3
        q[2 * s + 1] = _mm256_and_si256(raw, high);  // 16 x elements 8s+4 .. 8s+7
      }
    } else {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) q[s] = load32(b.qs + 32 * s);
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
    __m256 mw = _mm256_setzero_ps();
    if constexpr (T::kMins) {
      mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.m)));
    }
#pragma GCC unroll 4
    for (int c = 0; c < R; ++c) {
      const int8_t* xq = x[c][i].qs;
      const ActBlock& ab = act[c][i];
      __m256i p0 = T::kBias != 0 ? _mm256_set1_epi32(ab.bias) : _mm256_setzero_si256();
      __m256i p1 = _mm256_setzero_si256();
      __m256i p;
      if constexpr (T::kNibbles) {
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          p0 = _mm256_dpbusd_epi32(p0, q[2 * s], broadcast4(xq + 8 * s));
          p1 = _mm256_dpbusd_epi32(p1, q[2 * s + 1], broadcast4(xq + 8 * s + 4));
        }
        p = _mm256_add_epi32(p0, _mm256_srai_epi32(p1, 4));
      } else {
#pragma GCC unroll 4
        for (int s = 0; s < 8; s += 2) {
          p0 = _mm256_dpbusd_epi32(p0, q[s], broadcast4(xq + 4 * s));
          p1 = _mm256_dpbusd_epi32(p1, q[s + 1], broadcast4(xq + 4 * s + 4));
        }
        p = _mm256_add_epi32(p0, p1);
      }
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(ab.d));
      acc[c] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[c]);
      if constexpr (T::kMins) mins[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(ab.s), mins[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < R; ++c) out[c] = T::kMins ? _mm256_add_ps(acc[c], mins[c]) : acc[c];
}

// Activation rows of a tile: four, 8 + 4 + 8 + a few of the 32 registers.
constexpr int kTileRows = 4;

template <typename T>
void packed_matmul(const PackedMatmulArgs& a) {
  using W = typename T::W;
  using X = typename T::X;
  assert(a.k % kQK == 0);
  const int64_t nb = a.k / kQK;
  thread_local std::vector<ActBlock> acts;
  acts.resize(static_cast<size_t>(a.m * nb));
  prepare_activations<T>(a, nb, acts.data());
  const auto x_row = [&](int64_t c) {
    return reinterpret_cast<const X*>(static_cast<const uint8_t*>(a.xq) +
                                      static_cast<size_t>(c) * a.xq_stride);
  };
  const auto* w = static_cast<const W*>(a.w);
  // A gated pair's up group follows its gate group (pack_gated_pairs).
  const bool gated = a.epilogue == PackedEpilogue::SiluMul;
  assert(!gated || a.silu_mul != nullptr);
  const int64_t group_blocks = gated ? 2 * nb : nb;
  for (int64_t g = a.g0; g < a.g1; ++g) {
    const W* wb = w + g * group_blocks;
    const int64_t j0 = g * kPackRows;
    const int64_t rows = a.n - j0 < kPackRows ? a.n - j0 : kPackRows;
    const __mmask8 keep = static_cast<__mmask8>((1u << rows) - 1u);
    // The epilogue of activation row c: v for the group's eight rows (and, gated, up).
    const auto finish = [&](int64_t c, __m256 v, __m256 up) {
      float* dst = a.y + c * a.y_stride + (j0 - a.y_origin);
      if (gated) {
        alignas(32) float gate8[kPackRows], up8[kPackRows];
        _mm256_store_ps(gate8, v);
        _mm256_store_ps(up8, up);
        a.silu_mul(gate8, up8, dst, rows);
        return;
      }
      if (a.epilogue == PackedEpilogue::Add) v = _mm256_add_ps(_mm256_maskz_loadu_ps(keep, dst), v);
      if (rows == kPackRows) {
        _mm256_storeu_ps(dst, v);
      } else {
        _mm256_mask_storeu_ps(dst, keep, v);
      }
    };
    int64_t c = 0;
    for (; c + kTileRows <= a.m; c += kTileRows) {
      const X* xs[kTileRows];
      const ActBlock* as[kTileRows];
      for (int t = 0; t < kTileRows; ++t) {
        xs[t] = x_row(c + t);
        as[t] = acts.data() + (c + t) * nb;
      }
      __m256 out[kTileRows];
      __m256 out_up[kTileRows] = {};
      group_tile<T, kTileRows>(wb, nb, xs, as, out);
      if (gated) group_tile<T, kTileRows>(wb + nb, nb, xs, as, out_up);
      for (int t = 0; t < kTileRows; ++t) finish(c + t, out[t], out_up[t]);
    }
    for (; c < a.m; ++c) {
      const X* xs[1] = {x_row(c)};
      const ActBlock* as[1] = {acts.data() + c * nb};
      __m256 out[1];
      __m256 out_up[1] = {};
      group_tile<T, 1>(wb, nb, xs, as, out);
      if (gated) group_tile<T, 1>(wb + nb, nb, xs, as, out_up);
      finish(c, out[0], out_up[0]);
    }
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

}  // namespace tokamak::cpu::avx512
