#pragma once
// Encoding and decoding of rows of the paged KV cache in each KV dtype (core/kv_dtype.h
// gives the storage). One scalar implementation, used by every ISA: writing K/V is one row
// per token and layer, small beside attention, and a single encoder means every path stores
// the same bytes. The one exception is q4's scale search, most of a q4 row's cost: it has an
// AVX-512 twin (kv_codec_avx512.cpp) that makes bitwise the same choice. Attention decodes in registers (paged_attention_avx2.cpp); decode_row here
// is its reference.
//
// A tile is the (block_size, row_bytes) bytes of one block and KV head; q4 rows hold the
// Hadamard rotation of each group of 32 (hadamard32); decode_row undoes it. Its scales are
// kv_tile_scale_bytes() bytes of f16: one per row for int8 and fp8, head_dim / 32 per row for
// q4, row by row. Rows are independent: writing one touches nothing of the others.
//
// q4c is the exception: its scales are per channel over the block's rows (head_dim scales
// d_c, then head_dim minimums m_c), so its tiles are written whole (kv_write_tile), once the
// block is full; its rows are not rotated (a channel's own offset and range are what its
// scales absorb).

#include <cstdint>

#include "core/kv_dtype.h"

namespace tokamak::cpu {

// The orthonormal Walsh-Hadamard transform of 32 floats in place (its own inverse). q4 rows
// are stored rotated, group by group: a channel with outlier values (keys have a few) is
// spread over its group instead of setting a scale that crushes the other 31 values. The
// rotation is orthogonal, so attention rotates the query instead of every key (q . k =
// Hq . Hk) and the output instead of every value (sum p Hv = H sum p v).
void hadamard32(float* x);

// The f16-unrounded scale of a q4 group: of the 32 (rotated) values x, whose element of
// largest magnitude is `extreme`, the candidate scale with the least squared error (the
// extreme's / -8 or / 7, shrunk by 0 to 35% in 2.5% steps; codes clamped to [-8, 7]).
// q4_group_scale is the one the encoder uses: AVX-512 where the CPU has it, bitwise the
// reference's choice (one candidate per lane, the same arithmetic per lane).
float q4_group_scale(const float* x, float extreme);
float q4_group_scale_reference(const float* x, float extreme);

// FP8 E4M3 (bias 7, no infinities, 0x7f / 0xff NaN, largest finite 448).
inline constexpr float kFp8Max = 448.0f;
float fp8_e4m3_to_f32(uint8_t bits);
// Round to nearest even, saturating at +-448; NaN is not expected (encodes as 0).
uint8_t f32_to_fp8_e4m3(float x);

// Writes x (head_dim floats) as row `row` of a tile, and its scales. Not for q4c
// (kv_dtype_writes_rows): asserts, and writes nothing in a release build.
void kv_write_row(KVDType dtype, const float* x, int32_t head_dim, uint8_t* tile,
                  uint8_t* tile_scales, int32_t row);

// Writes rows (n_rows, head_dim) floats as rows [0, n_rows) of a tile, and the tile's scales;
// rows past n_rows and their scales are not touched (for q4c there are none: its scales cover
// the tile). Any dtype; all but q4c go row by row through kv_write_row, so the bytes are
// those of n_rows kv_write_row calls. q4c, per channel c over the n_rows rows (n_rows the
// block size, so that every row of the tile is coded):
//
//   d_c = f16((max_c - min_c) / 15)    m_c = f16(min_c)
//   q   = clamp(round((x - m_c) / d_c), 0, 15)      (0 where d_c is 0)
//
// coded against d_c and m_c as rounded to f16, the values the decoder sees.
void kv_write_tile(KVDType dtype, const float* rows, int32_t n_rows, int32_t head_dim,
                   uint8_t* tile, uint8_t* tile_scales);

// Decodes row `row` of a tile into head_dim floats, scales applied (q4c: m_c + q * d_c, with
// q * d_c exact in F32, a 4-bit code times an 11-bit significand).
void kv_decode_row(KVDType dtype, const uint8_t* tile, const uint8_t* tile_scales, int32_t head_dim,
                   int32_t row, float* out);

}  // namespace tokamak::cpu
