// The AMX ceiling loops (ceilings_kernels.h). Compiled with AMX-TILE and AMX-INT8; called only
// where the kernel level is amx (the CPU has them and Linux granted the tile state).

#include <immintrin.h>

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

}  // namespace

PeakLoop dot_i8() {
  return {tile_loop<64>, 4.0 * 16 * 16 * 64 * 2};
}

PeakLoop dot_i8_k32() {
  return {tile_loop<32>, 4.0 * 16 * 16 * 32 * 2};
}

}  // namespace tokamak::bench::amx
