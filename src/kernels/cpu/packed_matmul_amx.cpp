// The packed matmul (packed_weights.h) on AMX tiles. One tile multiply (tdpbssd) takes the 32
// int8 quants of one block of 16 activation rows (tile A, from the activations packed once per
// matmul: pack_activation_tiles) and of 16 weight rows (tile B) into 16 x 16 int32 sums (tile C):
// the exact isum of the packed arithmetic for 256 outputs in one instruction, where the VNNI kernel
// spends 128 vpdpbusd. The tile cannot sum over blocks, each block has its own scales, so
// every block's C is stored and its float steps (scale, convert, fma) run on AVX-512, a
// 16-lane row per activation row: the steps of the VNNI kernel in its order, so the same bits.
//
// The weights: a packed group holds a block's quants as 32-byte chunks of 8 rows x 4 elements,
// which is tile B's layout ("VNNI": a row of four consecutive elements for each column) for 8
// weight rows. Two groups side by side make the 64-byte rows of a 16-column B: a call copies
// each pair of its groups so into a buffer of the thread's, once, as signed bytes (Q4_0: q - 8,
// Q4_1: q, Q8_0: its stored q + 128 back to q; the nibbles unpacked), with their scales in
// F32. Signed weights need no activation-sum term (PackedActBlock::bias), and the buffer then
// serves every activation tile of the call from L2. There are two such buffers: the next pair
// is unpacked before the current one is multiplied, so that tile loads never wait for the
// vector stores that wrote them to drain.
//
// The multiply of block i + 1 is issued before block i's float steps, into the other C tile
// (two of each tile kind, by block parity). The tile unit and the vector units overlap little
// on the cores measured (tilestored beside the float steps costs about their sum), which
// bounds the gain over the VNNI kernel at ~1.5x (docs/BENCHMARKS.md, the AMX section).
//
// When the activation tiles of all the rows outgrow L2 (long rows of many tokens: the 1B
// shape's ffn_down at 512 rows), k is taken in passes, each over every pair, with each output's
// accumulators saved between them (blocks_per_pass).
//
// Calls of fewer than kMinTiledRows activation rows (a decode step, small batches) and the
// last m % 16 rows of the others run on the AVX-512 VNNI kernels, whose bits these are.

#include "kernels/cpu/packed_matmul_amx.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <vector>

#include "core/aligned_buffer.h"
#include "kernels/cpu/amx_tile_config.h"
#include "kernels/cpu/immintrin_avx512.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_matmul_avx512.h"
#include "kernels/cpu/simd_avx2.h"

namespace tokamak::cpu::amx {
namespace {

constexpr int kTileRows = kActivationTileRows;  // activation rows of tile A and C
constexpr int kTileCols = 16;                   // weight rows of tile B and C: two packed groups
constexpr int kBlockTileBytes = 512;            // tile B of one block: 8 rows x 64 bytes
constexpr int kBRowBytes = 64;                  // a row of tile B: 4 elements x 16 weight rows
// The fewest activation rows a call runs on tiles: each pair's unpacking is paid once for all
// of a call's tiles, and with the weights streaming from memory (a decode step of a batch)
// two tiles did not repay it. Concurrency-32 / 48 / 64 decode steps of the default model, two
// threads, matmul ms a step, VNNI against tiles: 19.8-21.0 / 20.6-23.7, 27.2-30.1 /
// 28.3-29.3, 38.1-38.9 / 33.2-34.4.
constexpr int64_t kMinTiledRows = 48;

// The tiles: C0/C1 = tmm0/1 (16 x 16 int32), A0/A1 = tmm2/3 (16 rows x 32 bytes), B0/B1 =
// tmm4/5 (8 rows x 64 bytes).
const AmxTileConfig& tile_config() {
  static const AmxTileConfig config = [] {
    AmxTileConfig c;
    for (int t = 0; t < 2; ++t) {
      c.rows[t] = kTileRows;
      c.colsb[t] = kTileCols * 4;
      c.rows[2 + t] = kTileRows;
      c.colsb[2 + t] = kQK;
      c.rows[4 + t] = kQK / 4;
      c.colsb[4 + t] = kBRowBytes;
    }
    return c;
  }();
  return config;
}

// A tile's register number is part of the instruction (the intrinsics paste it into the
// assembly), so the two block parities are spelled out.
template <int Parity>
inline void multiply_block(const int8_t* x, size_t x_stride, const int8_t* w) {
  if constexpr (Parity == 0) {
    _tile_loadd(2, x, x_stride);
    _tile_loadd(4, w, kBRowBytes);
    _tile_zero(0);
    _tile_dpbssd(0, 2, 4);
  } else {
    _tile_loadd(3, x, x_stride);
    _tile_loadd(5, w, kBRowBytes);
    _tile_zero(1);
    _tile_dpbssd(1, 3, 5);
  }
}

template <int Parity>
inline void store_sums(int32_t* out) {
  if constexpr (Parity == 0) {
    _tile_stored(0, out, kTileCols * 4);
  } else {
    _tile_stored(1, out, kTileCols * 4);
  }
}

struct Q4_0Policy {
  static constexpr DType kPacked = DType::Q4_0_X8;
  using W = block_q4_0x8;
  static constexpr bool kNibbles = true;
  static constexpr bool kMins = false;
  static constexpr char kOffset = 8;
  static constexpr auto kVnni = avx512::packed_matmul_q4_0;
};
struct Q4_1Policy {
  static constexpr DType kPacked = DType::Q4_1_X8;
  using W = block_q4_1x8;
  static constexpr bool kNibbles = true;
  static constexpr bool kMins = true;
  static constexpr char kOffset = 0;
  static constexpr auto kVnni = avx512::packed_matmul_q4_1;
};
struct Q8_0Policy {
  static constexpr DType kPacked = DType::Q8_0_X8;
  using W = block_q8_0x8;
  static constexpr bool kNibbles = false;
  static constexpr bool kMins = false;
  static constexpr char kOffset = static_cast<char>(0x80);  // q + 128 xor 0x80 = q
  static constexpr auto kVnni = avx512::packed_matmul_q8_0;
};

// A pair of groups as tile B blocks, and their scales (and Q4_1 mins) as 16 floats a block.
struct PairBuffer {
  std::vector<int8_t> quants;
  std::vector<float> d;
  std::vector<float> m;
};

inline __m512i two_chunks(const uint8_t* a, const uint8_t* b) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi = b != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))
                                  : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m512 two_halves(const uint16_t* a, const uint16_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi =
      b != nullptr ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)) : _mm_setzero_si128();
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// Groups a (weight rows 0-7 of the tile) and b (8-15; null: zeros) into `out`.
template <typename T>
void unpack_pair(const typename T::W* a, const typename T::W* b, int64_t nb, PairBuffer& out) {
  int8_t* q = out.quants.data();
  const __m512i offset = _mm512_set1_epi8(T::kOffset);
  for (int64_t i = 0; i < nb; ++i, q += kBlockTileBytes) {
    const uint8_t* qa = a[i].qs;
    const uint8_t* qb = b != nullptr ? b[i].qs : nullptr;
    const auto chunk = [&](int s) {
      return two_chunks(qa + 32 * s, qb != nullptr ? qb + 32 * s : nullptr);
    };
    if constexpr (T::kNibbles) {
      const __m512i low = _mm512_set1_epi8(0x0f);
      for (int s = 0; s < 4; ++s) {
        const __m512i raw = chunk(s);
        // Chunk s holds elements 8s..8s+3 in its low nibbles (B row 2s), 8s+4..8s+7 in its high.
        const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(raw, low), offset);
        const __m512i hi =
            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), low), offset);
        _mm512_storeu_si512(q + (2 * s) * kBRowBytes, lo);
        _mm512_storeu_si512(q + (2 * s + 1) * kBRowBytes, hi);
      }
    } else {
      for (int s = 0; s < 8; ++s)
        _mm512_storeu_si512(q + s * kBRowBytes, _mm512_xor_si512(chunk(s), offset));
    }
    _mm512_storeu_ps(out.d.data() + i * kTileCols,
                     two_halves(a[i].d, b != nullptr ? b[i].d : nullptr));
    if constexpr (T::kMins) {
      _mm512_storeu_ps(out.m.data() + i * kTileCols,
                       two_halves(a[i].m, b != nullptr ? b[i].m : nullptr));
    }
  }
  // The tile loads are assembly that the compiler does not know reads this buffer.
  asm volatile("" ::: "memory");
}

// One (tile, block) of the activation tiles (packed_matmul_amx.h).
struct ActTileBlock {
  int8_t q[kTileRows * kQK];
  float d[kTileRows];
  float s[kTileRows];
};
static_assert(sizeof(ActTileBlock) == 640);

// One block's float steps for the 16 rows of a tile: acc[c] = fma(dw * dx[c], float(sums of
// row c), acc[c]), the VNNI kernel's steps; with kMins also Q4_1's min term of the block,
// mins[c] = fma(mw, sx[c], mins[c]), kept in memory (the accumulators take 16 of the 32
// registers). In their own pass after the blocks, the min terms waited for nothing and
// overlapped nothing; here they fill the float steps' waits for the stored tile: smol Q4_1
// m = 128 matmuls 2-5% faster (kernels bench, one thread), the same bits.
template <bool kMins>
[[gnu::always_inline]] inline void float_steps(const int32_t* sums, const float* dw_block,
                                               const float* dx_block, const float* mw_block,
                                               const float* sx_block, float* mins,
                                               __m512 (&acc)[kTileRows]) {
  const __m512 dw = _mm512_loadu_ps(dw_block);
  __m512 mw;
  if constexpr (kMins) mw = _mm512_loadu_ps(mw_block);
#pragma GCC unroll 16
  for (int c = 0; c < kTileRows; ++c) {
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx_block[c]));
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(sums + c * kTileCols));
    acc[c] = _mm512_fmadd_ps(scale, isum, acc[c]);
    if constexpr (kMins) {
      float* m = mins + c * kTileCols;
      _mm512_store_ps(m, _mm512_fmadd_ps(mw, _mm512_set1_ps(sx_block[c]), _mm512_load_ps(m)));
    }
  }
}

// Blocks [0, nb) of one activation tile against a pair's blocks: acc[c] += the tile's row c's
// 16 products of each block in block order (the caller starts acc at zero or at a previous
// pass's sums). With kMins the min terms likewise, from mins_in (null: zeros), row c at 16c;
// at the end they go to mins_out, or with `last` into acc. They are summed in a local
// array: through a pointer the compiler could not tell them from the scales, and reloaded
// those after every store (smol Q4_1 m = 128 matmuls 10-25% slower).
template <typename T>
[[gnu::always_inline]] inline void tile_rows(const ActTileBlock* x, int64_t nb, const int8_t* wq,
                                             const float* wd, const float* wm, const float* mins_in,
                                             float* mins_out, bool last, __m512 (&acc)[kTileRows]) {
  constexpr size_t kAStride = kQK;  // bytes between tile A's rows
  alignas(64) int32_t sums0[kTileRows * kTileCols];
  alignas(64) int32_t sums1[kTileRows * kTileCols];
  alignas(64) float mins[kTileRows * kTileCols];  // Q4_1's min terms, row c at 16c
  if constexpr (T::kMins) {
    if (mins_in != nullptr) {
      std::memcpy(mins, mins_in, sizeof mins);
    } else {
      std::fill(std::begin(mins), std::end(mins), 0.0f);
    }
  }
  multiply_block<0>(x[0].q, kAStride, wq);
  for (int64_t i = 0; i < nb; i += 2) {
    const bool odd_next = i + 1 < nb;
    if (odd_next) multiply_block<1>(x[i + 1].q, kAStride, wq + (i + 1) * kBlockTileBytes);
    store_sums<0>(sums0);
    float_steps<T::kMins>(sums0, wd + i * kTileCols, x[i].d, wm + i * kTileCols, x[i].s, mins, acc);
    if (i + 2 < nb) multiply_block<0>(x[i + 2].q, kAStride, wq + (i + 2) * kBlockTileBytes);
    if (odd_next) {
      store_sums<1>(sums1);
      float_steps<T::kMins>(sums1, wd + (i + 1) * kTileCols, x[i + 1].d, wm + (i + 1) * kTileCols,
                            x[i + 1].s, mins, acc);
    }
  }
  if constexpr (T::kMins) {
    if (last) {
#pragma GCC unroll 16
      for (int c = 0; c < kTileRows; ++c) {
        acc[c] = _mm512_add_ps(acc[c], _mm512_load_ps(mins + c * kTileCols));
      }
    } else {
      std::memcpy(mins_out, mins, sizeof mins);
    }
  }
}

// Blocks of k a pass (packed_matmul below): all of them, unless the activation tiles of all the
// rows outgrow L2 (2 MiB a core on the AMX cores). Every pair reads every tile, so past L2 the
// tiles came from L3 for each pair: the 1B shape's ffn_down (k = 8,192, 5 MiB of tiles at 512
// rows) took 21.0-23.0 ms on two threads, 17.3 ms in passes (Q4_0; Q4_1 24.7-28.2 -> 22.1-22.7).
// Passes over k, each over every pair, keep one pass's tiles in L2 for all the pairs. They cost
// their shorter runs and the saved accumulators, which the tiles of 1-1.3 MiB that still fit
// (k = 2,048 at 512 rows) did not repay: 16.1-17.5 -> 18.9-19.2 ms with passes of 0.75 MiB.
constexpr int64_t kMaxActivationBytes = int64_t{3} << 19;  // 1.5 MiB
constexpr int64_t kPassActivationBytes = int64_t{1} << 20;

int64_t blocks_per_pass(int64_t n_tiles, int64_t nb) {
  const int64_t block_bytes = n_tiles * static_cast<int64_t>(sizeof(ActTileBlock));
  if (nb * block_bytes <= kMaxActivationBytes) return nb;
  const int64_t fit = std::max<int64_t>(16, kPassActivationBytes / block_bytes);
  const int64_t passes = (nb + fit - 1) / fit;
  return (nb + passes - 1) / passes;
}

template <typename T>
void packed_matmul(const PackedMatmulArgs& a) {
  using W = typename T::W;
  assert(a.k % kQK == 0);
  const int64_t nb = a.k / kQK;
  if (a.m < kMinTiledRows) {
    T::kVnni(a);
    return;
  }
  const int64_t n_tiles = a.m / kTileRows;
  const int64_t tiled_rows = n_tiles * kTileRows;
  if (tiled_rows < a.m) {  // the last rows, fewer than a tile, on the VNNI kernel
    PackedMatmulArgs rest = a;
    rest.xq = static_cast<const uint8_t*>(a.xq) + static_cast<size_t>(tiled_rows) * a.xq_stride;
    rest.m = a.m - tiled_rows;
    rest.y = a.y + tiled_rows * a.y_stride;
    if (a.x_blocks != nullptr) rest.x_blocks = a.x_blocks + tiled_rows * nb;
    rest.x_tiles = nullptr;
    T::kVnni(rest);
  }
  if (n_tiles == 0) return;

  // The activation tiles: the caller's, else formed here for this call.
  const auto* tiles = static_cast<const ActTileBlock*>(a.x_tiles);
  if (tiles == nullptr) {
    thread_local std::vector<ActTileBlock> own;
    own.resize(static_cast<size_t>(n_tiles * nb));
    pack_activation_tiles(T::kPacked, a.xq, a.xq_stride, a.k, 0, n_tiles, own.data());
    tiles = own.data();
  }

  // Two pair buffers: the next pair is unpacked before the current one is multiplied, so the
  // tile loads never wait for the vector stores that wrote their weights to drain.
  // k in passes (blocks_per_pass), each over every pair of the call; between passes each
  // (pair, tile)'s accumulators (and Q4_1's min terms) wait in `partial`, so every output still
  // sums its blocks in order: the same bits as one pass.
  const int64_t pass_blocks = blocks_per_pass(n_tiles, nb);
  const bool passes = pass_blocks < nb;
  constexpr int64_t kTileFloats = kTileRows * kTileCols;
  thread_local AlignedBuffer<float> partial;
  thread_local AlignedBuffer<float> partial_mins;
  if (passes) {
    // At most one pair per group of the share: a bound on the pairs below.
    const auto floats = static_cast<size_t>((a.g1 - a.g0) * n_tiles * kTileFloats);
    if (partial.size() < floats) partial = AlignedBuffer<float>(floats);
    if (T::kMins && partial_mins.size() < floats) partial_mins = AlignedBuffer<float>(floats);
  }

  thread_local PairBuffer pairs[2];
  for (PairBuffer& p : pairs) {
    p.quants.resize(static_cast<size_t>(pass_blocks * kBlockTileBytes));
    p.d.resize(static_cast<size_t>(pass_blocks * kTileCols));
    if (T::kMins) p.m.resize(static_cast<size_t>(pass_blocks * kTileCols));
  }

  const bool gated = a.epilogue == PackedEpilogue::SiluMul;
  assert(!gated || a.silu_mul != nullptr);
  const auto store = [&](float* dst, __m512 v, int64_t rows) {
    const __mmask16 keep = static_cast<__mmask16>((1u << rows) - 1u);
    if (a.epilogue == PackedEpilogue::Add) v = _mm512_add_ps(_mm512_maskz_loadu_ps(keep, dst), v);
    _mm512_mask_storeu_ps(dst, keep, v);
  };
  // silu(gate) * up of a gated pair's row, as the VNNI kernel does it (so the same bits).
  const auto silu_mul_store = [&](__m512 v, float* dst, int64_t rows) {
    const __m256 gate = _mm512_castps512_ps256(v);
    const __m256 up = _mm512_extractf32x8_ps(v, 1);
    if (rows == kPackRows) {
      _mm256_storeu_ps(dst, avx2::silu_mul8(gate, up));
      return;
    }
    alignas(32) float gate8[kPackRows], up8[kPackRows];
    _mm256_store_ps(gate8, gate);
    _mm256_store_ps(up8, up);
    a.silu_mul(gate8, up8, dst, rows);
  };

  _tile_loadconfig(&tile_config());
  const auto* w = static_cast<const W*>(a.w);
  const int64_t group_blocks = gated ? 2 * nb : nb;
  // A gated pair is its gate group then its up group; otherwise two neighbouring groups, or
  // the last one of an odd share alone.
  const auto pair_from = [&](int64_t g) { return gated || g + 1 < a.g1; };
  const auto after = [&](int64_t g) { return g + (gated ? 1 : (pair_from(g) ? 2 : 1)); };
  // One pass over every pair: blocks [i0, i0 + count). Without passes (kPasses false, the one
  // pass is all of k) nothing is saved; spelled as its own instance, the accumulators stay
  // where they were before passes existed (a shared instance ran smol Q4_1 m = 128 matmuls
  // 10-15% slower).
  const auto run_pass = [&]<bool kPasses>(int64_t i0, int64_t count) {
    const bool first = !kPasses || i0 == 0;
    const bool last = !kPasses || i0 + count == nb;
    // Blocks [i0, i0 + count) of group g's pair.
    const auto unpack = [&](int64_t g, PairBuffer& into) {
      const W* wa = w + g * group_blocks + i0;
      unpack_pair<T>(wa, pair_from(g) ? wa + nb : nullptr, count, into);
    };
    int current = 0;
    unpack(a.g0, pairs[current]);
    int64_t pair = 0;
    for (int64_t g = a.g0; g < a.g1; ++pair) {
      const bool two = pair_from(g);
      const int64_t next = after(g);
      if (next < a.g1) unpack(next, pairs[current ^ 1]);
      const int8_t* const wq = pairs[current].quants.data();
      const float* const wd = pairs[current].d.data();
      const float* const wm = pairs[current].m.data();
      const int64_t j0 = g * kPackRows;
      const int64_t cols = gated ? kPackRows : (two ? 2 * kPackRows : kPackRows);
      const int64_t rows = a.n - j0 < cols ? a.n - j0 : cols;
      float* const y0 = a.y + (j0 - a.y_origin);
      for (int64_t t = 0; t < n_tiles; ++t) {
        // This (pair, tile)'s accumulators between passes, row c at 16c, and its min terms.
        const size_t slot = static_cast<size_t>((pair * n_tiles + t) * kTileFloats);
        float* const saved = kPasses ? partial.data() + slot : nullptr;
        float* const saved_mins = kPasses && T::kMins ? partial_mins.data() + slot : nullptr;
        __m512 acc[kTileRows];
        if (first) {
#pragma GCC unroll 16
          for (int c = 0; c < kTileRows; ++c) acc[c] = _mm512_setzero_ps();
        } else {
#pragma GCC unroll 16
          for (int c = 0; c < kTileRows; ++c) acc[c] = _mm512_load_ps(saved + c * kTileCols);
        }
        tile_rows<T>(tiles + t * nb + i0, count, wq, wd, wm, first ? nullptr : saved_mins,
                     saved_mins, last, acc);
        if (!last) {
          // (tile_rows saved the min terms.)
#pragma GCC unroll 16
          for (int c = 0; c < kTileRows; ++c) _mm512_store_ps(saved + c * kTileCols, acc[c]);
          continue;
        }
        // Out of registers first: indexed in a loop below, acc would be kept in memory
        // throughout.
        alignas(64) float out[kTileRows][kTileCols];
#pragma GCC unroll 16
        for (int c = 0; c < kTileRows; ++c) _mm512_store_ps(out[c], acc[c]);
        for (int c = 0; c < kTileRows; ++c) {
          float* dst = y0 + (t * kTileRows + c) * a.y_stride;
          if (gated) {
            silu_mul_store(_mm512_load_ps(out[c]), dst, rows);
          } else {
            store(dst, _mm512_load_ps(out[c]), rows);
          }
        }
      }
      g = next;
      current ^= 1;
    }
  };
  if (!passes) {
    run_pass.template operator()<false>(0, nb);
  } else {
    for (int64_t i0 = 0; i0 < nb; i0 += pass_blocks) {
      run_pass.template operator()<true>(i0, std::min(pass_blocks, nb - i0));
    }
  }
  _tile_release();
}

}  // namespace

size_t activation_tiles_bytes(DType packed, int64_t m, int64_t k) {
  if (packed != DType::Q4_0_X8 && packed != DType::Q4_1_X8 && packed != DType::Q8_0_X8) return 0;
  if (m < kMinTiledRows) return 0;
  return static_cast<size_t>(m / kTileRows * (k / kQK)) * sizeof(ActTileBlock);
}

void pack_activation_tiles(DType packed, const void* xq, size_t xq_stride, int64_t k, int64_t t0,
                           int64_t t1, void* out) {
  const int64_t nb = k / kQK;
  const auto* base = static_cast<const uint8_t*>(xq);
  auto* tiles = static_cast<ActTileBlock*>(out);
  const bool q8_1 = packed == DType::Q4_1_X8;
  // A block's 16 rows at a time: their quants copied, their F16 scales gathered and widened
  // in one conversion each (one element at a time, this took ~3% of a 128-row matmul).
  const size_t block_bytes = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
  const size_t qs_offset = q8_1 ? offsetof(block_q8_1, qs) : offsetof(block_q8_0, qs);
  for (int64_t t = t0; t < t1; ++t) {
    ActTileBlock* tile = tiles + t * nb;
    const uint8_t* rows = base + static_cast<size_t>(t * kTileRows) * xq_stride;
    for (int64_t i = 0; i < nb; ++i) {
      alignas(32) uint16_t d[kTileRows];
      alignas(32) uint16_t s[kTileRows] = {};
      for (int c = 0; c < kTileRows; ++c) {
        const uint8_t* block = rows + c * xq_stride + static_cast<size_t>(i) * block_bytes;
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(tile[i].q + c * kQK),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + qs_offset)));
        std::memcpy(&d[c], block, sizeof(uint16_t));  // d leads both block types
        if (q8_1) std::memcpy(&s[c], block + offsetof(block_q8_1, s), sizeof(uint16_t));
      }
      const auto widen = [](const uint16_t* h) {
        return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
      };
      _mm512_storeu_ps(tile[i].d, widen(d));
      _mm512_storeu_ps(tile[i].s, widen(s));
    }
  }
}

void packed_matmul_q4_0(const PackedMatmulArgs& args) {
  packed_matmul<Q4_0Policy>(args);
}
void packed_matmul_q4_1(const PackedMatmulArgs& args) {
  packed_matmul<Q4_1Policy>(args);
}
void packed_matmul_q8_0(const PackedMatmulArgs& args) {
  packed_matmul<Q8_0Policy>(args);
}

}  // namespace tokamak::cpu::amx
