#pragma once
// Random-weight llama models written as GGUF by our own writer: tiny ones as test fixtures,
// large ones (say a 1B-llama shape) for speed and memory measurements, where the weight
// values do not matter. Weights are uniform with variance 1/fan_in so that activations stay
// O(1) through any depth; norms are near 1. The vocabulary is SentencePiece-style
// (tokenizer.ggml.model = "llama"): <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>
// (type 6), then pieces ("▁", letters, "▁"+letter, letter pairs, ...) with descending scores,
// as many as n_vocab allows. A model can instead carry a real file's tokenizer (see
// set_tokenizer), so that prompts tokenize as they do for that model.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_value.h"
#include "format/gguf_writer.h"

namespace tokamak {
namespace gguf {
class File;
}

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

// The transformer shapes of real models, by name; weight dtypes are left F32, seed and name at
// their defaults. nullopt for an unknown name.
//   "tiny": the SyntheticModelSpec defaults above (a test fixture)
//   "smol": SmolLM2-135M: 30 layers of 576, 9 heads of 64, 3 KV heads, FFN 1536, vocab
//           49152, context 8192, RoPE base 100000, tied output
//   "1b":   Llama 3.2 1B: 16 layers of 2048, 32 heads of 64, 8 KV heads, FFN 8192, vocab
//           128256, RoPE base 500000, tied output; context 8192 (the real 128k needs the
//           llama3 RoPE scaling, which the spec cannot express)
std::optional<SyntheticModelSpec> synthetic_shape(std::string_view name);
inline constexpr std::string_view kSyntheticShapes[] = {"tiny", "smol", "1b"};

// Every tokenizer.* key of a GGUF file, in file order, and the number of tokens.
struct TokenizerMetadata {
  std::vector<std::pair<std::string, gguf::Value>> entries;
  int32_t n_tokens = 0;  // size of tokenizer.ggml.tokens
};

// Throws Error when `file` has no tokenizer.ggml.tokens array.
TokenizerMetadata tokenizer_metadata(const gguf::File& file);

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
  // Replaces every tokenizer.* key with `tok`'s. Throws Error unless the model's vocabulary
  // (llama.vocab_size, the rows of token_embd) has tok.n_tokens entries.
  void set_tokenizer(const TokenizerMetadata& tok);
  // The && forms move the tensor data into the writer instead of copying it (a 1B model
  // then needs one copy in memory, not two).
  gguf::Writer to_writer() const&;
  gguf::Writer to_writer() &&;
  // Through "<path>.part", renamed into place when complete (gguf::Writer::write).
  void write(const std::string& path) const&;
  void write(const std::string& path) &&;
};

// Sets general.file_type from weight_dtype, as llama.cpp's files do. Throws Error for a spec
// that makes no model (zero sizes, heads not dividing, dims not multiples of the block size
// of a block dtype, unsupported dtype), before making any weight.
SyntheticModel make_synthetic_model(const SyntheticModelSpec& spec);

}  // namespace tokamak
