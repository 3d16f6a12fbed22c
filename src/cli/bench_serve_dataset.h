#pragma once
// Workloads of `tokamak bench serve`: the prompts (random text of exact token lengths,
// groups sharing a long prefix, or a JSONL file), their output lengths, and Poisson arrival
// times. Everything is drawn from one seed, so two runs (or two servers) see the same work.
// Multi-turn conversations, whose requests depend on the replies, are made by
// bench_serve_conversation.h from the same spec.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/rng.h"

namespace tokamak {
class Tokenizer;
}

namespace tokamak::cli {

enum class DatasetKind { Random, PrefixShared, File, MultiTurn };

struct DatasetSpec {
  DatasetKind kind = DatasetKind::Random;
  std::string path;                    // File: one JSON object per line
  std::optional<int32_t> num_prompts;  // nullopt: kDefaultNumPrompts, or every line of a file
  // Random: prompt tokens (BOS included); PrefixShared: question tokens; MultiTurn: tokens
  // of each user message.
  int32_t input_len = 256;
  int32_t output_len = 128;    // unless a file line gives its own "output_len"
  double range_ratio = 0;      // lengths uniform in [L * (1 - r), L * (1 + r)], r in [0, 1)
  int32_t prefix_groups = 4;   // PrefixShared: groups, each with its own prefix
  int32_t prefix_len = 1000;   // PrefixShared: tokens of each group's prefix
  int32_t conversations = 16;  // MultiTurn: conversations, each of `turns` requests
  int32_t turns = 10;
  int32_t system_len = 0;  // MultiTurn: tokens of the system prompt all share (0: none)
  uint64_t seed = 0;
};

inline constexpr int32_t kDefaultNumPrompts = 64;

// One request's input, for both endpoints.
struct BenchPrompt {
  std::string text;           // /v1/completions "prompt" (empty for a file line with messages)
  nlohmann::json messages;    // /v1/chat/completions "messages"
  int32_t prompt_tokens = 0;  // tokamak's tokenizer on `text` (BOS included) or the contents
  int32_t output_len = 0;     // max_tokens
};

// Throws Error for settings out of range or an unreadable / malformed file (naming the line).
// Not for MultiTurn (see make_conversations).
std::vector<BenchPrompt> make_dataset(const DatasetSpec& spec, const Tokenizer& tok);

// The checks of make_dataset on `spec`'s numbers; throws Error naming the flag.
void check_dataset_spec(const DatasetSpec& spec);

// A length uniform in [floor(L * (1 - r)), floor(L * (1 + r))] (as vLLM's random dataset
// draws), at least 1.
int32_t draw_length(int32_t length, double range_ratio, Rng& rng);

// Text that `tok` encodes (no BOS/EOS) to exactly `n_tokens` (>= 1) tokens in almost every
// case: random ids from `vocabulary`, decoded, re-encoded and cut or topped up until the
// round trip is stable (a few rounds at most). Always valid UTF-8.
std::string random_text(const Tokenizer& tok, std::span<const int32_t> vocabulary, int32_t n_tokens,
                        Rng& rng);

// Token ids whose piece is non-empty, valid UTF-8 text and not special: what random_text
// draws from. Throws Error when there are none.
std::vector<int32_t> text_vocabulary(const Tokenizer& tok);

// Seconds from the start at which each of `n` requests is sent: 0 for all when `rate` is
// nullopt (infinite), else a Poisson process of `rate` requests/s (exponential gaps; the
// first request at 0).
std::vector<double> arrival_times(size_t n, std::optional<double> rate, uint64_t seed);

}  // namespace tokamak::cli
