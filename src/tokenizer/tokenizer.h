#pragma once
// The tokenizer of a GGUF model: text -> token ids -> text, matching llama.cpp's
// llama_tokenize / llama_token_to_piece for the supported kinds.
//
// encode(text):
//   1. special-token text is cut out (special_tokens.h): user-defined tokens always, control
//      and unknown tokens when parse_special;
//   2. each remaining raw piece is tokenized on its own:
//        gpt2:  invalid UTF-8 repaired like llama.cpp (utf8.h) -> regex pre-tokenizer
//               (pre_tokenizer.h) -> byte-level BPE per word (bpe.h);
//        llama: " " prepended when add_space_prefix and the piece starts the text or follows
//               a special token -> spaces to U+2581 -> SentencePiece BPE (spm.h);
//   3. BOS / EOS around it all when add_special and the model asks for them.
// All state is read-only after from_gguf(): every method may be called from many threads.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak {

namespace gguf {
class File;
}

class BpeModel;
class SpmModel;
class PreTokenizer;
class SpecialTokenSplitter;

class Tokenizer {
 public:
  // Throws Error naming the file and the problem.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The exact bytes of the tokens' pieces, concatenated (may be invalid UTF-8 when the ids
  // split a character). SentencePiece: the first token's leading space (the one encode adds)
  // is dropped, as llama.cpp's detokenize does. skip_special leaves out control and unknown
  // tokens. Throws Error for an id out of range.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Raw bytes of one token: byte tokens <0xNN> give that byte, SentencePiece U+2581 gives a
  // space, the GPT-2 byte mapping is undone; control, unknown and user-defined tokens give
  // their text; unused and undefined tokens give nothing. Throws Error for an id out of range.
  std::string token_to_piece(int32_t id) const { return std::string(piece(id)); }
  std::string_view piece(int32_t id) const;         // the same, without a copy
  const std::string& token_text(int32_t id) const;  // the vocabulary string as stored

  int32_t n_vocab() const { return vocab_.size(); }
  TokenizerKind kind() const { return vocab_.kind(); }
  const Vocab& vocab() const { return vocab_; }
  std::optional<int32_t> bos_id() const { return vocab_.special().bos; }
  std::optional<int32_t> eos_id() const { return vocab_.special().eos; }
  std::optional<int32_t> eot_id() const { return vocab_.special().eot; }
  bool add_bos() const { return vocab_.add_bos(); }
  bool add_eos() const { return vocab_.add_eos(); }
  bool add_space_prefix() const { return vocab_.add_space_prefix(); }
  // eos, eot, eom, FIM pad/repo/separator and tokens whose text ends a turn (<|im_end|>,
  // <|eot_id|>, <end_of_turn>, <|end|>, <|endoftext|>, ...). False for ids out of range.
  bool is_end_of_generation(int32_t id) const;
  bool is_control(int32_t id) const;
  // Control or unknown: left out by decode(skip_special) and Detokenizer(skip_special).
  bool is_special(int32_t id) const;
  std::string pre_tokenizer_name() const { return vocab_.pre_tokenizer(); }

 private:
  explicit Tokenizer(Vocab vocab);
  void encode_raw(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  Vocab vocab_;
  std::vector<std::string> pieces_;  // token_to_piece of every token
  std::unique_ptr<SpecialTokenSplitter> specials_;
  std::unique_ptr<PreTokenizer> pre_;  // gpt2 only
  std::unique_ptr<BpeModel> bpe_;      // gpt2 only
  std::unique_ptr<SpmModel> spm_;      // llama only
};

}  // namespace tokamak
