#pragma once
// Element types of the paged KV cache (--kv-dtype) and how each stores one (block, kv-head)
// tile of block_size rows of head_dim values.
//
//   f16, bf16, f32   plain elements; no scales
//   int8             int8 elements; one f16 scale per row (token and kv-head):
//                    x = q * d, d = max |x| of the row / 127
//   fp8              FP8 E4M3 elements; one f16 scale per row: x = e4m3(q) * d,
//                    d = max |x| of the row / 448
//   q4               4-bit elements, two a byte (element 2i in the low nibble of byte i); one
//                    f16 scale per group of 32 elements of a row: x = (q - 8) * d
//   q4c              4-bit elements as q4, row after row; per channel c of the tile an f16
//                    scale d_c and an f16 minimum m_c over the block's rows (KIVI's
//                    per-channel keys): x = m_c + q * d_c, q in [0, 15]. Tile scales:
//                    d_0 .. d_(hd-1), then m_0 .. m_(hd-1)
//
//   per (block_size, hd) tile   row bytes        tile scale bytes
//   f16 / bf16 / f32            hd * 2 / 2 / 4   0
//   int8 / fp8                  hd               block_size * 2
//   q4                          hd / 2           block_size * hd / 32 * 2
//   q4c                         hd / 2           hd * 4
//
// Every row is encoded on its own, once. Why not one scale per (block, kv-head) tile, which
// costs less memory: a tile scale must grow when a later token needs more range, and the
// rows already stored would then be re-encoded, so a query of a prefill chunk would see the
// earlier tokens changed by later tokens of the same chunk, while a decode step never does.
// Outputs would depend on chunking (batch invariance, ARCHITECTURE.md); a test showed it.
//
// q4c is the one exception, and escapes that by being written only once its block is full,
// all rows at once (kv_write_tile), never row by row. Keys have a few outlier channels with
// large, nearly constant offsets; a group per channel absorbs them, where a row's groups must
// span them (perplexity of the default model: q4 keys per row +4.5..5.6%, q4 with q4c keys
// +0.45%). So the engine keeps each sequence's newest blocks in an F16 hot cache, encodes a
// block into the q4c pool once it is full, and attention reads the two
// (kv/paged_kv_cache.h, the hot window; kernels/cpu/paged_attention.h, n_cold).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokamak {

enum class KVDType : uint8_t { F16, BF16, F32, Int8, Fp8, Q4, Q4C };

inline constexpr int32_t kKVQ4Group = 32;  // elements per q4 scale

std::string_view kv_dtype_name(KVDType dtype);  // "f16", "int8", ..., "q4c"
// A dtype the main cache can be kept in (--kv-dtype), any case; nullopt for anything else,
// q4c included: its callers parse user flags for the cache that every token is written to
// row by row (ops write_paged_kv), which a q4c tile cannot take (kv_dtype_writes_rows).
std::optional<KVDType> kv_dtype_from_name(std::string_view s);
// "f16|bf16|f32|int8|fp8|q4", for help and error texts (the names kv_dtype_from_name takes).
std::string_view kv_dtype_choices();
// Whether rows can be written one at a time (kv_write_row): all but q4c, whose per-channel
// scales need the whole block at once (kv_write_tile).
bool kv_dtype_writes_rows(KVDType dtype);

// The dtypes of keys and of values, which may differ: keys are the sensitive half (their few
// outlier channels set the scales), so "int8,q4" keeps most of q4's saving at int8's
// quality (docs/BENCHMARKS.md, "KV dtypes").
struct KVDTypes {
  KVDType k = KVDType::F16;
  KVDType v = KVDType::F16;

  KVDTypes() = default;
  KVDTypes(KVDType both) : k(both), v(both) {}  // NOLINT: one dtype means both
  KVDTypes(KVDType key, KVDType value) : k(key), v(value) {}
  bool operator==(const KVDTypes&) const = default;
};
// "q4" (both) or "int8,q4" (keys, values), names as kv_dtype_from_name; nullopt otherwise.
std::optional<KVDTypes> kv_dtypes_from_name(std::string_view s);
std::string kv_dtypes_name(const KVDTypes& d);  // "q4" when both are q4, else "int8,q4"

// Bytes of one row of head_dim elements (head_dim a multiple of kKVQ4Group for q4).
size_t kv_row_bytes(KVDType dtype, int32_t head_dim);
// Bytes of scales kept per (block, kv-head) tile of block_size rows of head_dim elements
// (block_size x the f16 scales of one row; for q4c 2 x head_dim f16, whatever block_size).
size_t kv_tile_scale_bytes(KVDType dtype, int32_t block_size, int32_t head_dim);
// Whether a head dimension can be stored in this dtype (q4 needs whole groups; q4c a multiple
// of 8, whole bytes of codes and whole 8-lane vectors of channel scales).
bool kv_dtype_supports(KVDType dtype, int32_t head_dim);

}  // namespace tokamak
