#include "cli/bench_serve_conversation.h"

#include <cassert>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {
namespace {

using nlohmann::json;

json message(const char* role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

}  // namespace

std::vector<BenchConversation> make_conversations(const DatasetSpec& spec, const Tokenizer& tok) {
  check_dataset_spec(spec);
  const auto vocabulary = text_vocabulary(tok);
  std::string system;
  if (spec.system_len > 0) {
    // Its own stream: a system prompt added or resized leaves the user messages as they were.
    Rng system_rng(spec.seed ^ 0x5A5A5A5A5A5A5A5AULL);
    system = random_text(tok, vocabulary, spec.system_len, system_rng);
  }
  const auto count = [&tok](const std::string& text) {
    return static_cast<int32_t>(tok.encode(text, /*add_special=*/false, true).size());
  };
  const int32_t system_tokens = system.empty() ? 0 : count(system);
  Rng rng(spec.seed);
  std::vector<BenchConversation> out(static_cast<size_t>(spec.conversations));
  for (BenchConversation& c : out) {
    c.system = system;
    c.system_tokens = system_tokens;
    for (int32_t t = 0; t < spec.turns; ++t) {
      const int32_t len = draw_length(spec.input_len, spec.range_ratio, rng);
      c.users.push_back(random_text(tok, vocabulary, len, rng));
      c.user_tokens.push_back(count(c.users.back()));
      c.output_len.push_back(draw_length(spec.output_len, spec.range_ratio, rng));
    }
  }
  return out;
}

json turn_messages(const BenchConversation& c, size_t turn, std::span<const std::string> replies) {
  assert(turn < c.turns() && replies.size() == turn);
  json messages = json::array();
  if (!c.system.empty()) messages.push_back(message("system", c.system));
  for (size_t k = 0; k < turn; ++k) {
    messages.push_back(message("user", c.users[k]));
    messages.push_back(message("assistant", replies[k]));
  }
  messages.push_back(message("user", c.users[turn]));
  return messages;
}

int32_t turn_content_tokens(const BenchConversation& c, size_t turn) {
  assert(turn < c.turns());
  int32_t n = c.system_tokens + c.user_tokens[turn];
  for (size_t k = 0; k < turn; ++k) n += c.user_tokens[k] + c.output_len[k];
  return n;
}

}  // namespace tokamak::cli
