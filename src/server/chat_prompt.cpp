#include "server/chat_prompt.h"

#include "format/gguf.h"

namespace tokamak {

std::optional<ChatPrompter> ChatPrompter::from_gguf(const gguf::File& file,
                                                    const Tokenizer& tokenizer) {
  const auto source = file.get_string("tokenizer.chat_template");
  if (!source) return std::nullopt;
  return ChatPrompter(ChatTemplate::parse(*source), tokenizer);
}

ChatPrompter::ChatPrompter(ChatTemplate chat_template, const Tokenizer& tokenizer)
    : template_(std::move(chat_template)), tokenizer_(&tokenizer) {
  if (auto id = tokenizer.bos_id()) bos_text_ = tokenizer.token_text(*id);
  if (auto id = tokenizer.eos_id()) eos_text_ = tokenizer.token_text(*id);
}

std::string ChatPrompter::render(const std::vector<ChatMessage>& messages) const {
  return template_.apply(messages, /*add_generation_prompt=*/true, bos_text_, eos_text_);
}

std::vector<int32_t> ChatPrompter::tokens(const std::vector<ChatMessage>& messages) const {
  // The template writes special tokens (<|im_start|>, <s>, ...) as text: parse them, and
  // add BOS only if the template did not already write it.
  auto ids = tokenizer_->encode(render(messages), /*add_special=*/false, /*parse_special=*/true);
  const auto bos = tokenizer_->bos_id();
  if (tokenizer_->add_bos() && bos && (ids.empty() || ids.front() != *bos)) {
    ids.insert(ids.begin(), *bos);
  }
  return ids;
}

}  // namespace tokamak
