#pragma once
// Element types of the paged KV cache (--kv-dtype) and how each stores one (block, kv-head)
// tile of block_size rows of head_dim values.
//
//   f16, bf16, f32   plain elements; no scales
//   int8             int8 elements; one f32 scale per (block, kv-head) tile:
//                    x = q * scale, scale = max |x| of the tile / 127
//   fp8              FP8 E4M3 elements; one f32 scale per tile: x = e4m3(q) * scale,
//                    scale = max |x| of the tile / 448
//   q4               4-bit elements, two a byte (element 2i in the low nibble of byte i); one
//                    f16 scale per group of 32 elements of a row: x = (q - 8) * d
//
// Rows of a tile are written one token at a time, in order. A per-tile scale grows when a new
// row needs more range, and the rows already there are re-encoded with the new scale: the
// stored values depend only on the tile's tokens in order, never on how the writes were
// batched (batch invariance, ARCHITECTURE.md).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokamak {

enum class KVDType : uint8_t { F16, BF16, F32, Int8, Fp8, Q4 };

inline constexpr int32_t kKVQ4Group = 32;  // elements per q4 scale

std::string_view kv_dtype_name(KVDType dtype);                 // "f16", "int8", ...
std::optional<KVDType> kv_dtype_from_name(std::string_view s);  // any case
// "f16|bf16|f32|int8|fp8|q4", for help and error texts.
std::string_view kv_dtype_choices();

// Bytes of one row of head_dim elements (head_dim a multiple of kKVQ4Group for q4).
size_t kv_row_bytes(KVDType dtype, int32_t head_dim);
// Bytes of scales kept per (block, kv-head) tile of block_size rows of head_dim elements.
size_t kv_tile_scale_bytes(KVDType dtype, int32_t block_size, int32_t head_dim);
// Whether a head dimension can be stored in this dtype (q4 needs whole groups).
bool kv_dtype_supports(KVDType dtype, int32_t head_dim);

}  // namespace tokamak
