#include "core/dtype.h"

#include <array>
#include <cassert>
#include <cctype>
#include <string>

#include "core/error.h"

namespace tokamak {
namespace {

// Block layouts follow GGML (ggml-common.h) so that GGUF files are read as they are.
// `supported`: the loader accepts the type, and every kernel level computes with it. Q2_K and
// Q3_K are not supported yet; Q8_K is an activation encoding only.
constexpr std::array kTypes = {
    DTypeInfo{DType::F32, "F32", 1, 4, false, true},
    DTypeInfo{DType::F16, "F16", 1, 2, false, true},
    DTypeInfo{DType::Q4_0, "Q4_0", 32, 18, true, true},
    DTypeInfo{DType::Q4_1, "Q4_1", 32, 20, true, true},
    DTypeInfo{DType::Q5_0, "Q5_0", 32, 22, true, true},
    DTypeInfo{DType::Q5_1, "Q5_1", 32, 24, true, true},
    DTypeInfo{DType::Q8_0, "Q8_0", 32, 34, true, true},
    DTypeInfo{DType::Q8_1, "Q8_1", 32, 36, true, false},
    DTypeInfo{DType::Q2_K, "Q2_K", 256, 84, true, false},
    DTypeInfo{DType::Q3_K, "Q3_K", 256, 110, true, false},
    DTypeInfo{DType::Q4_K, "Q4_K", 256, 144, true, true},
    DTypeInfo{DType::Q5_K, "Q5_K", 256, 176, true, true},
    DTypeInfo{DType::Q6_K, "Q6_K", 256, 210, true, true},
    DTypeInfo{DType::Q8_K, "Q8_K", 256, 292, true, false},
    DTypeInfo{DType::I8, "I8", 1, 1, false, false},
    DTypeInfo{DType::I16, "I16", 1, 2, false, false},
    DTypeInfo{DType::I32, "I32", 1, 4, false, false},
    DTypeInfo{DType::I64, "I64", 1, 8, false, false},
    DTypeInfo{DType::F64, "F64", 1, 8, false, false},
    DTypeInfo{DType::BF16, "BF16", 1, 2, false, true},
};

// Repacked weights (in memory only): a row costs what its base type's row costs, the groups
// of eight rows being the base blocks rearranged. `supported` is false: the loader never
// accepts them from a file.
constexpr std::array kPackedTypes = {
    DTypeInfo{DType::Q4_0_X8, "Q4_0x8", 32, 18, true, false},
    DTypeInfo{DType::Q4_1_X8, "Q4_1x8", 32, 20, true, false},
    DTypeInfo{DType::Q8_0_X8, "Q8_0x8", 32, 34, true, false},
    // Q6_K's values as 8-bit quants with a scale per 16 elements (packed_weights.h): 36 bytes
    // a row and block of 32, more than Q6_K's 26.25.
    DTypeInfo{DType::Q6_K_X8, "Q6_Kx8", 32, 36, true, false},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type_id) {
  for (const auto& info : kTypes) {
    if (static_cast<uint32_t>(info.dtype) == ggml_type_id) return info;
  }
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& info : kTypes) {
    if (info.dtype == dtype) return info;
  }
  for (const auto& info : kPackedTypes) {
    if (info.dtype == dtype) return info;
  }
  throw Error("unknown dtype id " + std::to_string(static_cast<uint32_t>(dtype)));
}

std::string_view dtype_name(DType dtype) {
  return dtype_info(dtype).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kTypes) {
    if (info.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size(); ++i) {
      if (std::toupper(static_cast<unsigned char>(name[i])) != info.name[i]) same = false;
    }
    if (same) return info.dtype;
  }
  return std::nullopt;
}

size_t row_bytes(DType dtype, int64_t n) {
  const auto& info = dtype_info(dtype);
  assert(n >= 0 && n % info.block_size == 0);
  return static_cast<size_t>(n / info.block_size) * info.type_size;
}

std::optional<uint32_t> gguf_file_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q4_K:
      return 14;  // "mostly Q4_K_S": every quantized matrix in Q4_K
    case DType::Q5_K:
      return 16;  // "mostly Q5_K_S"
    case DType::Q6_K:
      return 18;
    case DType::BF16:
      return 32;
    default:
      return std::nullopt;
  }
}

}  // namespace tokamak
