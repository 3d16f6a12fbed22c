#pragma once
// Incremental detokenizer for streaming: token ids in, text out, never a broken character.
//
// Bytes of an unfinished UTF-8 sequence are held back until a later token completes it (an
// emoji split over four byte tokens comes out whole with the fourth). Bytes that can no
// longer be part of a well-formed sequence come out as U+FFFD, one per maximal ill-formed
// subpart, so every string returned is well-formed UTF-8, and the concatenation of all push()
// results and flush() equals utf8::append_repaired() of the whole byte stream.

#include <cstdint>
#include <string>

namespace tokamak {

class Tokenizer;

class Detokenizer {
 public:
  // skip_special: control and unknown tokens produce no text.
  // at_text_start: the first token starts the text, so SentencePiece's added leading space is
  // dropped as Tokenizer::decode does; leave false when continuing after a prompt.
  explicit Detokenizer(const Tokenizer& tok, bool skip_special = true, bool at_text_start = false);

  // The text completed by `id` (possibly empty). Throws Error for an id out of range.
  std::string push(int32_t id);
  // End of stream: whatever is held back, an incomplete sequence as U+FFFD.
  std::string flush();

  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool strip_space_;  // still to drop from the first token
  bool first_ = true;
  std::string pending_;  // bytes of an unfinished sequence (at most 3)
};

}  // namespace tokamak
