#pragma once
// ChatPrompter: chat messages -> prompt tokens, with the model's own chat template (GGUF
// `tokenizer.chat_template`), as transformers' apply_chat_template(add_generation_prompt=True)
// followed by tokenization. Immutable after construction: many threads may use one.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace gguf {
class File;
}

class ChatPrompter {
 public:
  // nullopt when the model carries no chat template. Throws Error when it has one that
  // cannot be parsed.
  static std::optional<ChatPrompter> from_gguf(const gguf::File& file, const Tokenizer& tokenizer);

  ChatPrompter(ChatTemplate chat_template, const Tokenizer& tokenizer);

  // The rendered text, ending with the assistant's turn opened. Throws ChatTemplateRaised
  // when the template rejects the messages (e.g. roles that do not alternate).
  std::string render(const std::vector<ChatMessage>& messages) const;
  // render() tokenized: the special tokens the template writes are parsed, and BOS is added
  // only when the tokenizer wants one and the template did not write it.
  std::vector<int32_t> tokens(const std::vector<ChatMessage>& messages) const;

 private:
  ChatTemplate template_;
  const Tokenizer* tokenizer_;
  std::string bos_text_;
  std::string eos_text_;
};

}  // namespace tokamak
