#pragma once
// The packed matmul (packed_weights.h) on Intel AMX tiles (packed_matmul_amx.cpp). Only the
// AMX kernel table hands them out: they run only on CPUs with AMX-INT8 whose OS has granted
// this process the tile state (core/cpu_features.h). Calls of 48 activation rows or more run
// on the tiles (their last m % 16 rows and smaller calls on the AVX-512 VNNI kernels): each
// output is bitwise what those and the scalar reference give, so the choice per call cannot
// change a result.

#include "kernels/cpu/packed_weights.h"

namespace tokamak::cpu::amx {

void packed_matmul_q4_0(const PackedMatmulArgs& args);  // Q4_0_X8 x Q8_0 activations
void packed_matmul_q4_1(const PackedMatmulArgs& args);  // Q4_1_X8 x Q8_1
void packed_matmul_q8_0(const PackedMatmulArgs& args);  // Q8_0_X8 x Q8_0

// The activations as tile A wants them (PackedMatmulArgs::x_tiles): for each tile of 16 rows
// and each block i, the 16 rows' 32 quants (512 bytes), then their scales d and Q8_1's s as
// F32 (64 bytes each). The last m % 16 rows have no tile (the VNNI kernel takes them). 0 bytes
// for the packed types these kernels do not cover (Q6_K_X8 runs on AVX2's kernel) and for
// calls too small for the tiles.
size_t activation_tiles_bytes(DType packed, int64_t m, int64_t k);
void pack_activation_tiles(DType packed, const void* xq, size_t xq_stride, int64_t k, int64_t t0,
                           int64_t t1, void* out);

}  // namespace tokamak::cpu::amx
