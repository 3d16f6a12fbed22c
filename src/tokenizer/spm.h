#pragma once
// SentencePiece-style BPE (llama's tokenizer.ggml.model = "llama"). The text, spaces already
// escaped as U+2581, starts as one symbol per UTF-8 character; the adjacent pair whose
// concatenation is a token with the highest score is merged until no pair is a token. What
// is left and is not a token falls back to byte tokens <0xNN>, else one unknown token.
//
//   "▁hello" -> [▁ h e l l o] -> [▁h e l l o] ... -> [▁hello]
//
// O(n log n) in the text length: a linked list of symbols and a max-heap of candidate pairs
// keyed (score, left position), stale candidates skipped when popped.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak {

class SpmModel {
 public:
  explicit SpmModel(const Vocab& vocab);

  // Appends the tokens of `text` (escaped, see above; any bytes are accepted).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // The token standing for one raw byte (<0xNN>, else the one-byte token), if any.
  std::optional<int32_t> byte_token(uint8_t byte) const { return byte_token_[byte]; }

 private:
  const Vocab* vocab_;
  std::array<std::optional<int32_t>, 256> byte_token_;
};

// Spaces to U+2581, as SentencePiece does before merging; with prefix_space, one more first.
std::string spm_escape_spaces(std::string_view text, bool prefix_space);

}  // namespace tokamak
