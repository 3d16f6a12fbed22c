#include "core/kv_dtype.h"

#include <array>
#include <cassert>
#include <cctype>

namespace tokamak {
namespace {

constexpr std::array<std::string_view, 7> kNames = {"f16", "bf16", "f32", "int8",
                                                    "fp8", "q4",   "q4c"};

}  // namespace

std::string_view kv_dtype_name(KVDType dtype) {
  return kNames[static_cast<size_t>(dtype)];
}

std::optional<KVDType> kv_dtype_from_name(std::string_view s) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (!kv_dtype_writes_rows(static_cast<KVDType>(i))) continue;  // not a --kv-dtype (q4c)
    const std::string_view name = kNames[i];
    if (name.size() != s.size()) continue;
    bool same = true;
    for (size_t c = 0; c < s.size() && same; ++c) {
      same = std::tolower(static_cast<unsigned char>(s[c])) == name[c];
    }
    if (same) return static_cast<KVDType>(i);
  }
  return std::nullopt;
}

std::optional<KVDTypes> kv_dtypes_from_name(std::string_view s) {
  const size_t comma = s.find(',');
  if (comma == std::string_view::npos) {
    const auto both = kv_dtype_from_name(s);
    return both ? std::optional<KVDTypes>(*both) : std::nullopt;
  }
  const auto k = kv_dtype_from_name(s.substr(0, comma));
  const auto v = kv_dtype_from_name(s.substr(comma + 1));
  if (!k || !v) return std::nullopt;
  return KVDTypes(*k, *v);
}

std::string kv_dtypes_name(const KVDTypes& d) {
  if (d.k == d.v) return std::string(kv_dtype_name(d.k));
  return std::string(kv_dtype_name(d.k)) + "," + std::string(kv_dtype_name(d.v));
}

std::string_view kv_dtype_choices() {
  return "f16|bf16|f32|int8|fp8|q4";
}

bool kv_dtype_writes_rows(KVDType dtype) {
  return dtype != KVDType::Q4C;
}

bool kv_dtype_supports(KVDType dtype, int32_t head_dim) {
  if (head_dim <= 0) return false;
  if (dtype == KVDType::Q4) return head_dim % kKVQ4Group == 0;
  if (dtype == KVDType::Q4C) return head_dim % 8 == 0;
  return true;
}

size_t kv_row_bytes(KVDType dtype, int32_t head_dim) {
  assert(kv_dtype_supports(dtype, head_dim));
  const auto n = static_cast<size_t>(head_dim);
  switch (dtype) {
    case KVDType::F16:
    case KVDType::BF16:
      return n * 2;
    case KVDType::F32:
      return n * 4;
    case KVDType::Int8:
    case KVDType::Fp8:
      return n;
    case KVDType::Q4:
    case KVDType::Q4C:
      return n / 2;
  }
  return 0;
}

size_t kv_tile_scale_bytes(KVDType dtype, int32_t block_size, int32_t head_dim) {
  assert(kv_dtype_supports(dtype, head_dim) && block_size > 0);
  switch (dtype) {
    case KVDType::Int8:
    case KVDType::Fp8:
      return static_cast<size_t>(block_size) * 2;
    case KVDType::Q4:
      return static_cast<size_t>(block_size) * static_cast<size_t>(head_dim / kKVQ4Group) * 2;
    case KVDType::Q4C:
      return static_cast<size_t>(head_dim) * 4;  // d_c then m_c, f16 each
    default:
      return 0;
  }
}

}  // namespace tokamak
