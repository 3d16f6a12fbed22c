#include "cli/conversation.h"

#include "core/error.h"
#include "format/gguf.h"

namespace tokamak::cli {
namespace {

ChatTemplate load_template(const gguf::File& file) {
  const auto source = file.get_string("tokenizer.chat_template");
  if (!source) {
    throw Error(file.path() + ": the model has no chat template (tokenizer.chat_template)");
  }
  return ChatTemplate::parse(*source);
}

}  // namespace

Conversation::Conversation(const gguf::File& file, const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), template_(load_template(file)) {
  if (auto id = tokenizer.bos_id()) bos_text_ = tokenizer.token_text(*id);
  if (auto id = tokenizer.eos_id()) eos_text_ = tokenizer.token_text(*id);
}

void Conversation::add(std::string role, std::string content) {
  messages_.push_back({std::move(role), std::move(content)});
}

std::vector<int32_t> Conversation::prompt_tokens() const {
  const std::string text = template_.apply(messages_, true, bos_text_, eos_text_);
  // The template writes special tokens (<|im_start|>, <s>, ...) as text: parse them, and
  // add BOS only if the template did not already write it.
  auto ids = tokenizer_.encode(text, /*add_special=*/false, /*parse_special=*/true);
  if (tokenizer_.add_bos() && tokenizer_.bos_id() &&
      (ids.empty() || ids.front() != *tokenizer_.bos_id())) {
    ids.insert(ids.begin(), *tokenizer_.bos_id());
  }
  return ids;
}

}  // namespace tokamak::cli
