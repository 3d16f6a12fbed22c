#pragma once
// The vocabulary of a model as stored in GGUF metadata (tokenizer.ggml.*): token strings,
// types, scores, merges, special token ids and the encoding flags, all validated when loaded.
//
// Keys read (n = number of tokens):
//   tokenizer.ggml.model         "gpt2" (byte-level BPE) | "llama" (SentencePiece BPE)
//   tokenizer.ggml.pre           pre-tokenizer name (BPE only; optional)
//   tokenizer.ggml.tokens        n strings
//   tokenizer.ggml.token_type    n integers in 0..6 (optional; default 1 = normal)
//   tokenizer.ggml.scores        n numbers (optional; SPM merge priorities)
//   tokenizer.ggml.merges        "left right" strings by rank (required for gpt2)
//   tokenizer.ggml.*_token_id    special ids; 0xFFFFFFFF (or -1) means "none"
//   tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix   bools

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tokamak {

namespace gguf {
class File;
}

// tokenizer.ggml.model = "gpt2" | "llama"
enum class TokenizerKind { BytePairGpt2, SentencePiece };

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct SpecialTokenIds {
  std::optional<int32_t> bos, eos, eot, eom, unk, sep, pad, mask;
  std::optional<int32_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
};

class Vocab {
 public:
  // Throws Error("<path>: <problem>") for missing or inconsistent metadata.
  static Vocab from_gguf(const gguf::File& file);

  TokenizerKind kind() const { return kind_; }
  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }

  const std::string& text(int32_t id) const {
    assert(contains(id));
    return texts_[static_cast<size_t>(id)];
  }
  // The effective type: tokens whose text is a known end-of-generation marker count as
  // Control even when the file says otherwise (as llama.cpp does).
  TokenType type(int32_t id) const {
    assert(contains(id));
    return types_[static_cast<size_t>(id)];
  }
  float score(int32_t id) const {
    assert(contains(id));
    return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)];
  }
  std::optional<int32_t> find(std::string_view text) const;

  const std::vector<std::string>& merges() const { return merges_; }
  const SpecialTokenIds& special() const { return special_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  const std::string& pre_tokenizer() const { return pre_; }
  const std::string& source() const { return source_; }  // file path, for messages
  bool is_end_of_generation(int32_t id) const;

  // Some BPE pre-tokenizers (llama3, tekken) add BOS by default; the file's
  // add_bos_token key still wins. Called once by the tokenizer builder.
  void set_default_add_bos(bool add_bos);

 private:
  struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  TokenizerKind kind_ = TokenizerKind::BytePairGpt2;
  std::string source_;
  std::string pre_;
  std::vector<std::string> texts_;
  std::vector<TokenType> types_;
  std::vector<float> scores_;  // empty when the file has none
  std::vector<std::string> merges_;
  std::unordered_map<std::string, int32_t, TransparentHash, std::equal_to<>> ids_;
  SpecialTokenIds special_;
  std::vector<int32_t> end_of_generation_;  // sorted
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_bos_from_file_ = false;
  bool add_space_prefix_ = false;
};

}  // namespace tokamak
