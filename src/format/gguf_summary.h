#pragma once
// What `tokamak info` shows about a GGUF file: the model's identity, its hyper-parameters
// (read from the `<architecture>.*` keys), tensor statistics and the tokenizer. summarize()
// collects the facts into a plain struct; the format_* functions turn them into text.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/gguf.h"

namespace tokamak::gguf {

struct TensorTypeStats {
  DType dtype = DType::F32;
  size_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct SpecialToken {
  std::string role;  // "bos", "eos", "eot", "unk", "pad"
  int64_t id = 0;
  std::optional<std::string> text;  // nullopt when the id is not in the vocabulary
};

struct ModelSummary {
  std::string path;
  uint64_t file_size = 0;
  uint32_t version = 0;
  uint32_t alignment = 0;
  size_t metadata_count = 0;
  std::optional<std::string> architecture;  // general.architecture
  std::optional<std::string> name;          // general.name

  // Hyper-parameters (absent keys stay nullopt). A count stored per layer as an array is
  // summarized by its largest value.
  std::optional<int64_t> context_length;
  std::optional<int64_t> embedding_length;
  std::optional<int64_t> block_count;
  std::optional<int64_t> feed_forward_length;
  std::optional<int64_t> head_count;
  std::optional<int64_t> head_count_kv;
  std::optional<int64_t> head_dim;  // attention.key_length, else embedding / head count
  bool head_dim_derived = false;    // true when computed rather than read
  std::optional<double> rope_freq_base;
  std::optional<int64_t> rope_dimension_count;
  std::optional<std::string> rope_scaling_type;
  std::optional<double> rope_scaling_factor;
  std::optional<int64_t> rope_original_context_length;
  std::optional<double> rms_epsilon;   // attention.layer_norm_rms_epsilon
  std::optional<double> norm_epsilon;  // attention.layer_norm_epsilon (non-RMS norms)
  std::optional<int64_t> vocab_size;   // <arch>.vocab_size, else the tokenizer's size

  size_t tensor_count = 0;
  std::vector<TensorTypeStats> tensor_types;  // most tensors first
  uint64_t parameter_count = 0;               // sum of all tensors' elements
  uint64_t weight_bytes = 0;                  // sum of all tensors' data sizes

  std::optional<std::string> tokenizer_model;  // tokenizer.ggml.model
  std::optional<std::string> tokenizer_pre;    // tokenizer.ggml.pre
  std::optional<int64_t> token_count;          // length of tokenizer.ggml.tokens
  std::vector<SpecialToken> special_tokens;    // those whose id key is present
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<size_t> chat_template_bytes;  // tokenizer.chat_template, when present
};

// Throws Error (naming the file and key) when a key it reads has the wrong type.
ModelSummary summarize(const File& file);

std::string format_summary(const ModelSummary& summary);
// format_summary(summarize(file)).
std::string describe(const File& file);
// Every metadata key, one per line: key, type, value (arrays abbreviated).
std::string format_metadata(const File& file);
// Every tensor, one per line: name, type, shape (GGML order), bytes, offset.
std::string format_tensors(const File& file);

// "93.8 MiB", "512 B": for listings.
std::string format_bytes(uint64_t bytes);
// "134.5 M", "260.1 K", "1.24 B": for parameter counts.
std::string format_count(uint64_t count);

}  // namespace tokamak::gguf
