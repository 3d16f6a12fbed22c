#include "cli/conversation.h"

#include "core/error.h"
#include "format/gguf.h"

namespace tokamak::cli {
namespace {

ChatPrompter load_prompter(const gguf::File& file, const Tokenizer& tokenizer) {
  auto prompter = ChatPrompter::from_gguf(file, tokenizer);
  if (!prompter) {
    throw Error(file.path() + ": the model has no chat template (tokenizer.chat_template)");
  }
  return std::move(*prompter);
}

}  // namespace

Conversation::Conversation(const gguf::File& file, const Tokenizer& tokenizer)
    : prompter_(load_prompter(file, tokenizer)) {}

void Conversation::add(std::string role, std::string content) {
  messages_.push_back({std::move(role), std::move(content)});
}

}  // namespace tokamak::cli
