#pragma once
// Converts a GGUF model's weight matrices to another tensor type (`tokamak quantize`): every
// tensor of two or more dimensions is dequantized to f32 and re-encoded as `target`; vectors
// (norm weights, biases) stay as they are. Metadata is copied, with general.file_type set to
// the matching GGML file type. Deterministic: the same input gives the same bytes.

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tokamak {

struct QuantizeReport {
  int64_t tensors_converted = 0;
  int64_t tensors_kept = 0;
  int64_t tensors_fallback = 0;  // of those converted: K-quant targets whose rows are not
                                 // whole super-blocks, written as Q5_0 / Q5_1 / Q8_0 instead
  uint64_t bytes_in = 0;   // weight bytes read
  uint64_t bytes_out = 0;  // weight bytes written
};

// A K-quant target (Q4_K, Q5_K, Q6_K) writes matrices whose row length is not a multiple of 256
// as Q5_0, Q5_1 and Q8_0 respectively, as llama-quantize does. Throws Error for an unsupported
// target, a row length not divisible by the target's block size, or an input tensor type that
// cannot be dequantized.
QuantizeReport quantize_model(const std::string& in_path, const std::string& out_path,
                              DType target);

}  // namespace tokamak
