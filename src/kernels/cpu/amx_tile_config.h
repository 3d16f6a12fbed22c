#pragma once
// The 64-byte operand of LDTILECFG, palette 1 (Intel SDM): for each of the 8 tile registers
// its rows and its bytes per row; everything else zero.
//
// Keep configurations in static objects and hand those to _tile_loadconfig: GCC 12's intrinsic
// declares an 8-byte memory operand, so the stores that fill a local configuration may be
// dropped and ldtilecfg then faults (ggml's AMX code built by GCC 12 does, on this project's
// AMX guest).

#include <cstdint>

namespace tokamak::cpu {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace tokamak::cpu
