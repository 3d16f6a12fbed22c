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
//
// Every row is encoded on its own, once. Why not one scale per (block, kv-head) tile, which
// costs less memory: a tile scale must grow when a later token needs more range, and the
// rows already stored would then be re-encoded, so a query of a prefill chunk would see the
// earlier tokens changed by later tokens of the same chunk, while a decode step never does.
// Outputs would depend on chunking (batch invariance, ARCHITECTURE.md); a test showed it.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokamak {

enum class KVDType : uint8_t { F16, BF16, F32, Int8, Fp8, Q4 };

inline constexpr int32_t kKVQ4Group = 32;  // elements per q4 scale

std::string_view kv_dtype_name(KVDType dtype);                  // "f16", "int8", ...
std::optional<KVDType> kv_dtype_from_name(std::string_view s);  // any case
// "f16|bf16|f32|int8|fp8|q4", for help and error texts.
std::string_view kv_dtype_choices();

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
// "q4" (both) or "int8,q4" (keys, values); nullopt for anything else.
std::optional<KVDTypes> kv_dtypes_from_name(std::string_view s);
std::string kv_dtypes_name(const KVDTypes& d);  // "q4" when both are q4, else "int8,q4"

// Bytes of one row of head_dim elements (head_dim a multiple of kKVQ4Group for q4).
size_t kv_row_bytes(KVDType dtype, int32_t head_dim);
// Bytes of scales kept per (block, kv-head) tile of block_size rows of head_dim elements
// (block_size x the f16 scales of one row).
size_t kv_tile_scale_bytes(KVDType dtype, int32_t block_size, int32_t head_dim);
// Whether a head dimension can be stored in this dtype (q4 needs whole groups).
bool kv_dtype_supports(KVDType dtype, int32_t head_dim);

}  // namespace tokamak
