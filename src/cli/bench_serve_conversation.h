#pragma once
// The multi-turn chat workload of `tokamak bench serve --dataset multiturn`: conversations
// whose user messages are drawn from the seed, replayed against the server turn by turn.
// Turn k's request carries the whole history, as a chat client sends it: the shared system
// prompt (if any), every earlier user message and the assistant's replies as received, then
// the k-th user message. Its prefix is thus the previous turn's prompt and reply, which a
// server's prefix cache can serve.
//
//   turn 1:  [system] user1
//   turn 2:  [system] user1 reply1 user2
//   turn 3:  [system] user1 reply1 user2 reply2 user3        (reply k: as received)

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cli/bench_serve_dataset.h"

namespace tokamak {
class Tokenizer;
}

namespace tokamak::cli {

// The scripted side of one conversation: what the user says, and how long each reply is.
struct BenchConversation {
  std::string system;                // shared by every conversation; empty: none
  int32_t system_tokens = 0;         // tokens of `system` (no BOS)
  std::vector<std::string> users;    // one message per turn
  std::vector<int32_t> user_tokens;  // tokens of each (no BOS)
  std::vector<int32_t> output_len;   // max_tokens of each turn (EOS ignored: exact)

  size_t turns() const { return users.size(); }
};

// spec.conversations conversations of spec.turns turns: user messages of spec.input_len
// tokens and replies of spec.output_len (both spread by range_ratio), after a system prompt
// of spec.system_len tokens shared by all (none when 0). Throws Error for settings out of
// range.
std::vector<BenchConversation> make_conversations(const DatasetSpec& spec, const Tokenizer& tok);

// The "messages" of turn `turn` (0-based) of `c`: the history with `replies` (the
// assistant's text of turns 0 .. turn - 1, as received) and the turn's user message.
// Requires replies.size() == turn < c.turns().
nlohmann::json turn_messages(const BenchConversation& c, size_t turn,
                             std::span<const std::string> replies);

// The tokens of turn `turn`'s message contents, its replies counted at their exact
// output_len: the prompt size when the server reports none (chat template tokens aside).
int32_t turn_content_tokens(const BenchConversation& c, size_t turn);

}  // namespace tokamak::cli
