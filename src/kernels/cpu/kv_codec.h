#pragma once
// Encoding and decoding of rows of the paged KV cache in each KV dtype (core/kv_dtype.h
// gives the storage). One scalar implementation, used by every ISA: writing K/V is one row
// per token and layer, small beside attention, and a single encoder means every path stores
// the same bytes. Attention decodes in registers (paged_attention_avx2.cpp); decode_row here
// is its reference.
//
// A tile is the (block_size, row_bytes) bytes of one block and KV head; q4 rows hold the
// Hadamard rotation of each group of 32 (hadamard32); decode_row undoes it. Its scales are
// kv_tile_scale_bytes() bytes of f16: one per row for int8 and fp8, head_dim / 32 per row for
// q4, row by row. Rows are independent: writing one touches nothing of the others.

#include <cstdint>

#include "core/kv_dtype.h"

namespace tokamak::cpu {

// The orthonormal Walsh-Hadamard transform of 32 floats in place (its own inverse). q4 rows
// are stored rotated, group by group: a channel with outlier values (keys have a few) is
// spread over its group instead of setting a scale that crushes the other 31 values. The
// rotation is orthogonal, so attention rotates the query instead of every key (q . k =
// Hq . Hk) and the output instead of every value (sum p Hv = H sum p v).
void hadamard32(float* x);

// FP8 E4M3 (bias 7, no infinities, 0x7f / 0xff NaN, largest finite 448).
inline constexpr float kFp8Max = 448.0f;
float fp8_e4m3_to_f32(uint8_t bits);
// Round to nearest even, saturating at +-448; NaN is not expected (encodes as 0).
uint8_t f32_to_fp8_e4m3(float x);

// Writes x (head_dim floats) as row `row` of a tile, and its scales.
void kv_write_row(KVDType dtype, const float* x, int32_t head_dim, uint8_t* tile,
                  uint8_t* tile_scales, int32_t row);

// Decodes row `row` of a tile into head_dim floats, scales applied.
void kv_decode_row(KVDType dtype, const uint8_t* tile, const uint8_t* tile_scales, int32_t head_dim,
                   int32_t row, float* out);

}  // namespace tokamak::cpu
