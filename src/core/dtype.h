#pragma once
// Element types of tensors. The numeric values of DType are GGML's type ids, so a GGUF tensor
// type maps to a DType by a checked cast. Quantized types store blocks of `block_size`
// elements in `type_size` bytes; a row of n elements (n a multiple of block_size) takes
// n / block_size * type_size bytes.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tokamak {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  // Weights repacked at load for a kernel level's matmul (kernels/cpu/packed_weights.h): rows
  // interleaved in groups of eight. In memory only: no file holds them, so the GGML id lookup
  // and the name lookup never return them.
  Q4_0_X8 = 0x10000 + 2,
  Q4_1_X8 = 0x10000 + 3,
  Q8_0_X8 = 0x10000 + 8,
  Q6_K_X8 = 0x10000 + 14,
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  uint32_t block_size;  // elements per block (1 for plain types)
  uint32_t type_size;   // bytes per block
  bool quantized;
  bool supported;  // the loader accepts tensors of this type and kernels compute with it
};

// Info for a known GGML type id, or nullopt for an id this build does not know (or for the
// in-memory repacked types).
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type_id);
const DTypeInfo& dtype_info(DType dtype);
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);  // "q4_0", "F16", ... (any case)

// GGUF's general.file_type (llama_ftype) of a file whose matrices are mostly `dtype`, for
// the types we write; nullopt for others.
std::optional<uint32_t> gguf_file_type(DType dtype);

// Bytes taken by a row of n elements; n must be a multiple of the block size.
size_t row_bytes(DType dtype, int64_t n);

}  // namespace tokamak
