// The AMX ceiling loops (ceilings_kernels.h). Compiled with AMX-TILE and AMX-INT8, and AVX-512
// for the block loop's float steps; called only where the kernel level is amx (the CPU has them,
// AVX-512 too, and Linux granted the tile state).

// GCC 12 warns inside its own AVX-512 headers (see src/kernels/cpu/kernels_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "ceilings_kernels.h"
#include "kernels/cpu/amx_tile_config.h"

namespace tokamak::bench::amx {
namespace {

// Tiles 0-3 the int32 results (16 x 16), 4-5 A (16 rows x K bytes), 6-7 B (K / 4 rows x 64
// bytes); a static object (amx_tile_config.h says why).
template <int K>
const cpu::AmxTileConfig& config() {
  static const cpu::AmxTileConfig c = [] {
    cpu::AmxTileConfig t;
    for (int i = 0; i < 4; ++i) {
      t.rows[i] = 16;
      t.colsb[i] = 64;
    }
    for (int i = 4; i < 6; ++i) {
      t.rows[i] = 16;
      t.colsb[i] = K;
      t.rows[i + 2] = K / 4;
      t.colsb[i + 2] = 64;
    }
    return t;
  }();
  return c;
}

// Four independent 16 x 16 results a step, each of K-deep int8 products (2 A x 2 B tiles).
template <int K>
double tile_loop(int64_t iters) {
  alignas(64) static thread_local int8_t operands[2][16 * 64];
  alignas(64) int32_t out[16 * 16];
  for (int i = 0; i < 16 * 64; ++i) {
    operands[0][i] = static_cast<int8_t>(i % 7 - 3);
    operands[1][i] = static_cast<int8_t>(i % 5 - 2);
  }
  _tile_loadconfig(&config<K>());
  _tile_loadd(4, operands[0], K);
  _tile_loadd(5, operands[1], K);
  _tile_loadd(6, operands[0], 64);
  _tile_loadd(7, operands[1], 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  double sum = 0;
  for (int32_t v : out) sum += v;
  return sum;
}

// The AMX kernel's inner loop (src/kernels/cpu/packed_matmul_amx.cpp) on operands in L1: a
// 32-deep tile multiply a GGUF block (16 activation rows x 16 weight rows), its 256 int32 sums
// stored to memory (a tile cannot be read any other way, and each block has its own scales), and
// their float steps on AVX-512, acc[c] = fma(dw * dx[c], float(sums of row c), acc[c]), the next
// block's multiply issued before them. What the tiles reach at most on a 32-block format.
constexpr int kBlocks = 16;  // blocks cycled through: 16 KiB of A and B tiles, in L1

const cpu::AmxTileConfig& blocks_config() {
  static const cpu::AmxTileConfig c = [] {
    cpu::AmxTileConfig t;
    for (int i = 0; i < 2; ++i) {
      t.rows[i] = 16;  // C: 16 x 16 int32
      t.colsb[i] = 64;
      t.rows[2 + i] = 16;  // A: 16 rows x 32 quants
      t.colsb[2 + i] = 32;
      t.rows[4 + i] = 8;  // B: 8 rows x (4 quants x 16 weight rows)
      t.colsb[4 + i] = 64;
    }
    return t;
  }();
  return c;
}

[[gnu::always_inline]] inline void block_float_steps(const int32_t* sums, const float* dw_block,
                                                     const float* dx_block, __m512 (&acc)[16]) {
  asm volatile("" ::: "memory");  // the tile store wrote sums
  const __m512 dw = _mm512_load_ps(dw_block);
#pragma GCC unroll 16
  for (int c = 0; c < 16; ++c) {
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx_block[c]));
    acc[c] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * c)), acc[c]);
  }
}

double blocks_loop(int64_t iters) {
  alignas(64) static thread_local int8_t a[kBlocks][16 * 32];
  alignas(64) static thread_local int8_t b[kBlocks][8 * 64];
  alignas(64) static thread_local float dw[kBlocks][16];
  alignas(64) static thread_local float dx[kBlocks][16];
  for (int i = 0; i < kBlocks; ++i) {
    for (int e = 0; e < 512; ++e) {
      a[i][e] = static_cast<int8_t>((i + e) % 7 - 3);
      b[i][e] = static_cast<int8_t>((i + e) % 5 - 2);
    }
    for (int c = 0; c < 16; ++c) {
      dw[i][c] = 0.5f;
      dx[i][c] = 1e-6f * static_cast<float>(i + c + 1);
    }
  }
  alignas(64) int32_t sums[2][256];
  __m512 acc[16];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  _tile_loadconfig(&blocks_config());
  _tile_loadd(2, a[0], 32);
  _tile_loadd(4, b[0], 64);
  _tile_zero(0);
  _tile_dpbssd(0, 2, 4);
  // Two blocks an iteration (the tile numbers are part of the instructions).
  for (int64_t it = 0; it < iters; ++it) {
    const int i = static_cast<int>((2 * it) % kBlocks);
    const int next = (i + 2) % kBlocks;
    _tile_loadd(3, a[i + 1], 32);
    _tile_loadd(5, b[i + 1], 64);
    _tile_zero(1);
    _tile_dpbssd(1, 3, 5);
    _tile_stored(0, sums[0], 64);
    block_float_steps(sums[0], dw[i], dx[i], acc);
    _tile_loadd(2, a[next], 32);
    _tile_loadd(4, b[next], 64);
    _tile_zero(0);
    _tile_dpbssd(0, 2, 4);
    _tile_stored(1, sums[1], 64);
    block_float_steps(sums[1], dw[i + 1], dx[i + 1], acc);
  }
  _tile_release();
  __m512 s = acc[0];
  for (int c = 1; c < 16; ++c) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace

PeakLoop dot_i8_blocks() {
  return {blocks_loop, 2.0 * 16 * 16 * 32 * 2};
}

PeakLoop dot_i8() {
  return {tile_loop<64>, 4.0 * 16 * 16 * 64 * 2};
}

PeakLoop dot_i8_k32() {
  return {tile_loop<32>, 4.0 * 16 * 16 * 32 * 2};
}

}  // namespace tokamak::bench::amx
