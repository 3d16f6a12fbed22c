#pragma once
// Regex pre-tokenizers for byte-level BPE: text is cut into words before merges run, so that
// merges never cross a word boundary. Patterns run through PCRE2 (UTF-8 + Unicode
// properties, JIT-compiled).
//
// Several patterns apply in sequence, like llama.cpp and Hugging Face "Split" pre-tokenizers
// with the Isolated behaviour: pattern k runs inside every piece produced by pattern k-1, and
// both its matches and the unmatched gaps between them become pieces.
//
//   "a 123"  --\p{N}-->  ["a ", "1", "2", "3"]  --gpt2-->  ["a", " ", "1", "2", "3"]

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak {

struct PreTokenizerSpec {
  std::vector<std::string> patterns;  // PCRE2 syntax, applied in order
  bool ignore_merges = false;         // a word that is itself a token is taken whole
  bool add_bos = false;               // default for tokenizer.ggml.add_bos_token
};

// The spec for a tokenizer.ggml.pre name ("smollm", "llama-bpe", "qwen2", ...); nullopt when
// the name is unknown. The empty name (key absent) is llama.cpp's "default".
std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name);

// Names find_pre_tokenizer() knows (one per distinct spec family and alias).
std::vector<std::string> known_pre_tokenizers();

class PreTokenizer {
 public:
  struct Word {
    size_t offset;
    size_t length;
  };

  // Compiles every pattern; throws Error naming the pattern when one does not compile.
  explicit PreTokenizer(const std::vector<std::string>& patterns);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Replaces `words` with the pieces of `text` (well-formed UTF-8), in order, non-empty,
  // covering it exactly. Safe to call from several threads at once.
  void split(std::string_view text, std::vector<Word>& words) const;

 private:
  struct Pattern;
  std::vector<std::unique_ptr<Pattern>> patterns_;
};

}  // namespace tokamak
