#include "tokenizer/detokenizer.h"

#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tokamak {

Detokenizer::Detokenizer(const Tokenizer& tok, bool skip_special, bool at_text_start)
    : tok_(&tok),
      skip_special_(skip_special),
      strip_space_(at_text_start && tok.add_space_prefix()) {}

std::string Detokenizer::push(int32_t id) {
  std::string_view piece = tok_->piece(id);
  if (skip_special_ && tok_->is_special(id)) piece = {};
  if (first_ && strip_space_ && piece.starts_with(' ')) piece.remove_prefix(1);
  first_ = false;

  std::string out;
  if (pending_.empty()) {
    const size_t used = utf8::append_repaired(out, piece, false);
    pending_.assign(piece.substr(used));
  } else {
    pending_.append(piece);
    const size_t used = utf8::append_repaired(out, pending_, false);
    pending_.erase(0, used);
  }
  return out;
}

std::string Detokenizer::flush() {
  std::string out;
  utf8::append_repaired(out, pending_, true);
  pending_.clear();
  return out;
}

}  // namespace tokamak
