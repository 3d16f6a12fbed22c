#pragma once
// Random-weight llama models written as GGUF by our own writer: tiny ones as test fixtures,
// large ones (say a 1B-llama shape) for speed and memory measurements, where the weight
// values do not matter. Weights are uniform with variance 1/fan_in so that activations stay
// O(1) through any depth; norms are near 1. The vocabulary is SentencePiece-style
// (tokenizer.ggml.model = "llama"): <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>
// (type 6), then pieces ("▁", letters, "▁"+letter, letter pairs, ...) with descending scores,
// as many as n_vocab allows.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_value.h"
#include "format/gguf_writer.h"

namespace tokamak {

struct SyntheticModelSpec {
  int32_t n_vocab = 512;
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_ff = 128;
  int32_t n_ctx = 256;  // context_length
  int32_t n_rot = 0;    // 0 = head dim
  float rope_freq_base = 10000.0f;
  float rope_scaling_factor = 0.0f;  // > 0: linear RoPE scaling with this factor
  float rms_eps = 1e-5f;
  DType weight_dtype = DType::F32;     // the layers' matrices (and output.weight)
  DType embedding_dtype = DType::F32;  // token_embd.weight
  bool tied_output = false;            // no output.weight: the head reuses token_embd
  uint64_t seed = 1;
  std::string name = "synthetic";
};

// A model as metadata and encoded tensors, for tests to alter before writing.
struct SyntheticModel {
  struct TensorData {
    std::string name;
    std::vector<int64_t> shape;  // GGUF order (innermost first)
    DType dtype;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, gguf::Value>> metadata;
  std::vector<TensorData> tensors;

  TensorData* find(const std::string& name);
  void set(const std::string& key, gguf::Value value);  // replaces or appends
  void erase(const std::string& key);                   // metadata key, if present
  gguf::Writer to_writer() const;
  void write(const std::string& path) const;
};

// Throws Error for a spec that makes no model (zero sizes, heads not dividing, dims not
// multiples of the block size of a block dtype, unsupported dtype).
SyntheticModel make_synthetic_model(const SyntheticModelSpec& spec);

}  // namespace tokamak
