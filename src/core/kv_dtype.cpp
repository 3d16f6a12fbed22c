#include "core/kv_dtype.h"

#include <array>
#include <cassert>
#include <cctype>

namespace tokamak {
namespace {

constexpr std::array<std::string_view, 6> kNames = {"f16", "bf16", "f32", "int8", "fp8", "q4"};

}  // namespace

std::string_view kv_dtype_name(KVDType dtype) {
  return kNames[static_cast<size_t>(dtype)];
}

std::optional<KVDType> kv_dtype_from_name(std::string_view s) {
  for (size_t i = 0; i < kNames.size(); ++i) {
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

std::string_view kv_dtype_choices() {
  return "f16|bf16|f32|int8|fp8|q4";
}

bool kv_dtype_supports(KVDType dtype, int32_t head_dim) {
  return head_dim > 0 && (dtype != KVDType::Q4 || head_dim % kKVQ4Group == 0);
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
    default:
      return 0;
  }
}

}  // namespace tokamak
