#pragma once
// Per-request sampling parameters: the OpenAI / vLLM parameter set, as a plain value that the
// server fills from an HTTP body and the engine hands to a Sampler and a StopChecker.
//
// validate() is the single place where impossible values are rejected; the server answers 400
// with its message, and everything downstream (Sampler, StopChecker) may then trust the values.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tokamak {

struct SamplingParams {
  // Limits checked by validate(). kMaxLogprobs matches OpenAI's top_logprobs maximum.
  static constexpr int32_t kMaxLogprobs = 20;
  static constexpr size_t kMaxStopStrings = 16;
  static constexpr size_t kMaxStopStringBytes = 256;
  static constexpr size_t kMaxStopTokenIds = 64;
  static constexpr float kMaxPenalty = 2.0f;  // presence / frequency lie in [-2, 2]
  // A temperature below this samples greedily (vLLM's _SAMPLING_EPS): dividing logits by a
  // smaller one only spreads float rounding, never changes which token is most likely.
  static constexpr float kGreedyTemperature = 1e-5f;

  float temperature = 1.0f;  // >= 0; < kGreedyTemperature means greedy (argmax)
  int32_t top_k = 0;         // keep the k most likely tokens; 0 or -1 = off
  float top_p = 1.0f;        // (0, 1]: keep the smallest set with mass >= top_p; 1 = off
  float min_p = 0.0f;        // [0, 1]: keep tokens with prob >= min_p * max prob; 0 = off
  // CTRL / Hugging Face definition, over prompt + generated tokens: a seen token's logit is
  // divided by it when positive and multiplied by it otherwise. > 0; 1 = off.
  float repetition_penalty = 1.0f;
  // OpenAI definition, over generated tokens only:
  //   logit[t] -= presence_penalty * (count[t] > 0) + frequency_penalty * count[t]
  float presence_penalty = 0.0f;   // [-2, 2]; 0 = off
  float frequency_penalty = 0.0f;  // [-2, 2]; 0 = off
  // Same seed + same logits -> same tokens. Absent: the Sampler draws a random seed.
  std::optional<uint64_t> seed;
  // Most tokens to generate (>= 1). Absent: until the context window is full.
  std::optional<int32_t> max_tokens;
  std::vector<std::string> stop;        // stop strings (not part of the output)
  std::vector<int32_t> stop_token_ids;  // extra tokens that end generation, besides EOS
  bool ignore_eos = false;              // keep generating past the EOS token
  // Return the log-probability of each chosen token and of the top-N alternatives
  // (0 = only the chosen token). Absent: no log-probabilities.
  std::optional<int32_t> logprobs;

  bool greedy() const { return temperature < kGreedyTemperature; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  bool top_k_enabled() const { return top_k > 0; }
  size_t longest_stop_bytes() const;

  // nullopt when every value is possible; otherwise a one-line message that names the
  // parameter by its API field name, e.g. "top_p must be in (0, 1], got 1.5". Never throws.
  // With vocab_size, token ids (stop_token_ids) and logprobs are also checked against it.
  std::optional<std::string> validate(std::optional<int32_t> vocab_size = std::nullopt) const;
};

}  // namespace tokamak
