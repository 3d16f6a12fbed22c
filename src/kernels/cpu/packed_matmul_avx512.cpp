// The packed matmul (packed_weights.h) with AVX-512 VNNI. The lanes are weight rows: a
// block of 32 elements of a group costs 8 vpdpbusd (each four elements of eight rows against
// four activation quants broadcast from memory), one int-to-float conversion and one fma for
// all the rows, and a group's results are stored with one instruction.
//
// Two tile shapes. With several activation rows (prefill, batched decode) two groups run side
// by side in 16-lane registers (Lanes16), 8 activation rows a tile: Zen 4
// runs a 512-bit op at half the rate of a 256-bit one, so the arithmetic rate is the same, but
// it issues as one macro-op, and the 8-lane form was bound by how many it could issue (~0.5 of
// the vpdpbusd peak with every operand in L1; the pairs reach 0.65-0.75). A single activation
// row (a decode step, which streams the weights from memory) and a lone last group run in
// 8-lane registers (Lanes8), four activation rows a tile.
//
// The 4-bit nibbles are unpacked once per block for all the tile's rows (an and for the low,
// a shift and an and for the high ones), so that each row's block is one chain of 8 vpdpbusd
// and nothing else before its float steps. The earlier form left the high nibbles in place
// ((byte & 0xf0) = 16 * q) and gave each row a second sum to shift down and add: two vector
// ops a row a block where now one a block is spent (Q8_0 rows also had two sums, to add). On the
// Intel AMX guest (kernels bench, avx512 level, one thread) the 16-lane tiles ran 3-10% faster for
// it, and the decode GEMV (8 lanes, one row, two threads) 7-9%; the integer sums, so the results,
// are the same. This file is compiled with the AVX-512 flags and only called on CPUs that have
// them; its helpers stay in an anonymous namespace (see kernels_avx512.cpp for why).

#include "kernels/cpu/packed_matmul_avx512.h"

#include <cassert>
#include <cstring>

#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu::avx512 {
namespace {

using ActBlock = PackedActBlock;

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m128i load16(const uint16_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The two register widths of a tile: a lane per weight row of one group (Lanes8), or of two
// groups side by side (Lanes16: lanes 0-7 group a's rows, 8-15 group b's). The tile code is
// one (tile below); only loads and the vpdpbusd form differ. The vpdpbusd takes its four
// activation quants broadcast straight from memory: GCC 12 emits a separate vpbroadcastd for
// the intrinsics, one more macro-op per vpdpbusd in a loop whose limit is how many it issues.
struct Lanes8 {
  using F = __m256;
  using I = __m256i;
  static constexpr bool kPair = false;
  static I quants(const uint8_t* a, const uint8_t*) { return load32(a); }
  static F halves(const uint16_t* a, const uint16_t*) { return _mm256_cvtph_ps(load16(a)); }
  static I dpbusd(I acc, I w, const int8_t* p) {
    asm("vpdpbusd %2%{1to8%}, %1, %0"
        : "+v"(acc)
        : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
    return acc;
  }
  static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I zero_i() { return _mm256_setzero_si256(); }
  static F zero() { return _mm256_setzero_ps(); }
  static F set1f(float v) { return _mm256_set1_ps(v); }
  static I bytes(char v) { return _mm256_set1_epi8(v); }
  static I and_i(I a, I b) { return _mm256_and_si256(a, b); }
  static I srli16_4(I a) { return _mm256_srli_epi16(a, 4); }
  static F to_f(I a) { return _mm256_cvtepi32_ps(a); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
};
struct Lanes16 {
  using F = __m512;
  using I = __m512i;
  static constexpr bool kPair = true;
  static I quants(const uint8_t* a, const uint8_t* b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load32(a)), load32(b), 1);
  }
  static F halves(const uint16_t* a, const uint16_t* b) {
    return _mm512_cvtph_ps(
        _mm256_inserti128_si256(_mm256_castsi128_si256(load16(a)), load16(b), 1));
  }
  static I dpbusd(I acc, I w, const int8_t* p) {
    asm("vpdpbusd %2%{1to16%}, %1, %0"
        : "+v"(acc)
        : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
    return acc;
  }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I zero_i() { return _mm512_setzero_si512(); }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static I bytes(char v) { return _mm512_set1_epi8(v); }
  static I and_i(I a, I b) { return _mm512_and_si512(a, b); }
  static I srli16_4(I a) { return _mm512_srli_epi16(a, 4); }
  static F to_f(I a) { return _mm512_cvtepi32_ps(a); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
};

// A policy per packed type: W and X the weight and activation blocks, kMins for Q4_1's min
// term, kBias: the integer sum of a block starts at -kBias * sum(activation quants) (weights
// stored unsigned with that offset), kNibbles for the 4-bit layouts, kPairTileRows the
// activation rows of a 16-lane tile (4, 6 and 8 timed for each type on 576- to 8192-wide
// shapes on Zen 4, the best kept; Q4_1, whose min accumulators take 6 more registers, was
// best at 6 there with the two integer sums a row of the earlier form, and at 8 with one on
// the Intel AMX guest: m = 32 / 128 3-9% faster than 6; not re-timed on Zen 4).
struct Q4_0Policy {
  static constexpr DType kPacked = DType::Q4_0_X8;
  using W = block_q4_0x8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr int kBias = 8;
  static constexpr bool kNibbles = true;
  static constexpr int kPairTileRows = 8;
};
struct Q4_1Policy {
  static constexpr DType kPacked = DType::Q4_1_X8;
  using W = block_q4_1x8;
  using X = block_q8_1;
  static constexpr bool kMins = true;
  static constexpr int kBias = 0;
  static constexpr bool kNibbles = true;
  static constexpr int kPairTileRows = 8;
};
struct Q8_0Policy {
  static constexpr DType kPacked = DType::Q8_0_X8;
  using W = block_q8_0x8;
  using X = block_q8_0;
  static constexpr bool kMins = false;
  static constexpr int kBias = 128;
  static constexpr bool kNibbles = false;
  static constexpr int kPairTileRows = 8;
};

// How far ahead of the block in use the weights are prefetched (a group's blocks are
// contiguous, and so are the groups of a thread's share). A decode step streams each weight
// once from DRAM, and one sequential stream per core does not keep enough reads in flight on
// its own: on the 2-vCPU Zen 4 guest 4 KiB ahead took the 1B shape's ffn_up GEMV from ~0.6 to
// ~0.9 of the two-thread read ceiling (kernels bench, medians of 5; 1 KiB and 2 KiB in between).
// On the Intel AMX guest, into L2 (T1) 8 KiB ahead beat into L1 4 KiB ahead: the default model's
// decode matmuls 3.79-3.98 -> 2.87-3.20 ms a step (three alternations; 2-6% in a faster period of
// the machine), the 1B Q4_0 shape's 29.2-31.0 -> 25.7-28.3 ms, a concurrency-32 step's ~3%;
// into L1 2 KiB ahead was slower, none 1.3x slower. Zen 4 measured only into L1, up to 4 KiB.
constexpr int kPrefetchBytes = 8192;

// Activation rows x[0..R) against the blocks wa[0..nb) of one group (Lanes8) or of wa's and
// wb's groups side by side (Lanes16): out[c] holds row c's results, a lane per weight row.
// A lane's arithmetic is the same in either width, so results are too.
template <typename T, typename L, int R>
inline void tile(const typename T::W* wa, const typename T::W* wb, int64_t nb,
                 const typename T::X* const* x, const ActBlock* const* act, typename L::F* out) {
  using F = typename L::F;
  using I = typename L::I;
  F acc[R];
  F mins[R];
#pragma GCC unroll 8
  for (int c = 0; c < R; ++c) {
    acc[c] = L::zero();
    mins[c] = L::zero();
  }
  const I low = L::bytes(0x0f);
  for (int64_t i = 0; i < nb; ++i) {
    const auto& ba = wa[i];
    const auto& bb = L::kPair ? wb[i] : wa[i];
    // A block is 144-272 bytes: every cache line of the one kPrefetchBytes ahead.
    const char* ahead_a = reinterpret_cast<const char*>(&ba) + kPrefetchBytes;
    const char* ahead_b = reinterpret_cast<const char*>(&bb) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(ba); line += 64) {
      _mm_prefetch(ahead_a + line, _MM_HINT_T1);
      if constexpr (L::kPair) _mm_prefetch(ahead_b + line, _MM_HINT_T1);
    }
    I q[8];
    if constexpr (T::kNibbles) {
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const I raw = L::quants(ba.qs + 32 * s, bb.qs + 32 * s);
        q[2 * s] = L::and_i(raw, low);                   // elements 8s .. 8s+3
        q[2 * s + 1] = L::and_i(L::srli16_4(raw), low);  // elements 8s+4 .. 8s+7
      }
    } else {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) q[s] = L::quants(ba.qs + 32 * s, bb.qs + 32 * s);
    }
    const F dw = L::halves(ba.d, bb.d);
    F mw = L::zero();
    if constexpr (T::kMins) mw = L::halves(ba.m, bb.m);
#pragma GCC unroll 8
    for (int c = 0; c < R; ++c) {
      const int8_t* xq = x[c][i].qs;
      const ActBlock& ab = act[c][i];
      // q[s] holds elements 4s .. 4s+3 of the block in every layout.
      I p = T::kBias != 0 ? L::set1(ab.bias) : L::zero_i();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) p = L::dpbusd(p, q[s], xq + 4 * s);
      const F scale = L::mul(dw, L::set1f(ab.d));
      acc[c] = L::fma(scale, L::to_f(p), acc[c]);
      if constexpr (T::kMins) mins[c] = L::fma(mw, L::set1f(ab.s), mins[c]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < R; ++c) out[c] = T::kMins ? L::add(acc[c], mins[c]) : acc[c];
}

// Activation rows of an 8-lane tile: four, 8 + 4 + 8 + a few of the 32 registers.
constexpr int kTileRows = 4;

template <typename T>
void packed_matmul(const PackedMatmulArgs& a) {
  using W = typename T::W;
  using X = typename T::X;
  assert(a.k % kQK == 0);
  const int64_t nb = a.k / kQK;
  const ActBlock* acts = activation_blocks_of(T::kPacked, a);
  const auto x_row = [&](int64_t c) { return activation_row<X>(a, c); };
  // The activation rows [c, c + R) of a tile and their blocks' scales and sums.
  const auto tile_rows = [&]<int R>(int64_t c, const X* (&xs)[R], const ActBlock* (&as)[R]) {
    for (int t = 0; t < R; ++t) {
      xs[t] = x_row(c + t);
      as[t] = acts + (c + t) * nb;
    }
  };
  const auto* w = static_cast<const W*>(a.w);
  // A gated pair's up group follows its gate group (pack_gated_pairs): the pair runs as one
  // 16-lane tile, gate in the low lanes. Otherwise groups run two at a time, the last one of
  // an odd share alone in 8 lanes.
  const bool gated = a.epilogue == PackedEpilogue::SiluMul;
  assert(!gated || a.silu_mul != nullptr);
  const int64_t group_blocks = gated ? 2 * nb : nb;
  // silu(gate) * up for a group's rows: in registers for a whole group, which is bitwise
  // what the kernel table's silu_mul gives (the AVX-512 table's is AVX2's, whose groups of
  // 8 are silu_mul8; the epilogue test holds them equal), through it for a partial group
  // (its tail takes libm's exp). Called for every group it added 1.8 ms to the 6.1 ms of a
  // 512-row gate/up matmul of the default model (one thread); in registers 0.9-1.3 ms.
  const auto silu_mul_store = [&](__m256 gate, __m256 up, float* dst, int64_t rows) {
    if (rows == kPackRows) {
      _mm256_storeu_ps(dst, avx2::silu_mul8(gate, up));
      return;
    }
    alignas(32) float gate8[kPackRows], up8[kPackRows];
    _mm256_store_ps(gate8, gate);
    _mm256_store_ps(up8, up);
    a.silu_mul(gate8, up8, dst, rows);
  };
  const auto store = [&](float* dst, __m512 v, int64_t rows) {
    const __mmask16 keep = static_cast<__mmask16>((1u << rows) - 1u);
    if (a.epilogue == PackedEpilogue::Add) v = _mm512_add_ps(_mm512_maskz_loadu_ps(keep, dst), v);
    if (rows == 2 * kPackRows) {
      _mm512_storeu_ps(dst, v);
    } else {
      _mm512_mask_storeu_ps(dst, keep, v);
    }
  };
  for (int64_t g = a.g0; g < a.g1;) {
    const W* wb = w + g * group_blocks;
    const int64_t j0 = g * kPackRows;
    float* const y0 = a.y + (j0 - a.y_origin);
    // A single activation row (a decode step) streams the weights from memory: it runs one
    // group at a time, which kept the 1B shape's Q4_0 decode at 22-24 ms a token where two
    // groups side by side took 28-30 (two threads, `bench throughput --profile`).
    const bool pair = a.m > 1 && (gated || g + 1 < a.g1);
    if (pair) {
      // The columns the tile writes: 8 (gated) or up to 16.
      const int64_t cols = gated ? kPackRows : 2 * kPackRows;
      const int64_t rows = a.n - j0 < cols ? a.n - j0 : cols;
      const auto finish = [&](int64_t c, __m512 v) {
        float* dst = y0 + c * a.y_stride;
        if (gated) {
          silu_mul_store(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1), dst, rows);
        } else {
          store(dst, v, rows);
        }
      };
      const auto run_tile = [&]<int R>(int64_t c) {
        const X* xs[R];
        const ActBlock* as[R];
        tile_rows(c, xs, as);
        __m512 out[R];
        tile<T, Lanes16, R>(wb, wb + nb, nb, xs, as, out);
        for (int t = 0; t < R; ++t) finish(c + t, out[t]);
      };
      int64_t c = 0;
      for (; c + T::kPairTileRows <= a.m; c += T::kPairTileRows) {
        run_tile.template operator()<T::kPairTileRows>(c);
      }
      // What is left of m, fewer than kPairTileRows rows, as at most three tiles.
      if (c + 4 <= a.m && T::kPairTileRows > 4) {
        run_tile.template operator()<4>(c);
        c += 4;
      }
      if (c + 2 <= a.m) {
        run_tile.template operator()<2>(c);
        c += 2;
      }
      if (c < a.m) run_tile.template operator()<1>(c);
      g += gated ? 1 : 2;
      continue;
    }
    // 8 lanes: a lone group, or a gated pair's gate then its up group.
    const int64_t rows = a.n - j0 < kPackRows ? a.n - j0 : kPackRows;
    const auto run_tile = [&]<int R>(int64_t c) {
      const X* xs[R];
      const ActBlock* as[R];
      tile_rows(c, xs, as);
      __m256 out[R];
      __m256 up[R];
      tile<T, Lanes8, R>(wb, nullptr, nb, xs, as, out);
      if (gated) tile<T, Lanes8, R>(wb + nb, nullptr, nb, xs, as, up);
      for (int t = 0; t < R; ++t) {
        float* dst = y0 + (c + t) * a.y_stride;
        if (gated) {
          silu_mul_store(out[t], up[t], dst, rows);
        } else {
          store(dst, _mm512_castps256_ps512(out[t]), rows);
        }
      }
    };
    int64_t c = 0;
    for (; c + kTileRows <= a.m; c += kTileRows) run_tile.template operator()<kTileRows>(c);
    for (; c < a.m; ++c) run_tile.template operator()<1>(c);
    ++g;
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
