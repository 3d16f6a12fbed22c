#pragma once
// A multi-turn conversation for `tokamak run --chat` and `tokamak chat`: the messages so far,
// turned into prompt tokens with the model's own chat template.

#include <string>
#include <vector>

#include "server/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {

class Conversation {
 public:
  // Throws Error when the model carries no tokenizer.chat_template.
  Conversation(const gguf::File& file, const Tokenizer& tokenizer);

  void add(std::string role, std::string content);
  void clear() { messages_.clear(); }
  void pop_last() {
    if (!messages_.empty()) messages_.pop_back();
  }
  // Tokens of the whole conversation, ending with the assistant's turn opened.
  std::vector<int32_t> prompt_tokens() const { return prompter_.tokens(messages_); }

 private:
  ChatPrompter prompter_;
  std::vector<ChatMessage> messages_;
};

}  // namespace tokamak::cli
