#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace tokamak {
namespace {

// The message for params changed by `edit`, or "" when they are valid.
template <typename Edit>
std::string message_for(Edit edit, std::optional<int32_t> vocab_size = std::nullopt) {
  SamplingParams params;
  edit(params);
  return params.validate(vocab_size).value_or("");
}

TEST(SamplingParamsTest, DefaultsAreValidAndOff) {
  const SamplingParams params;
  EXPECT_EQ(params.validate(), std::nullopt);
  EXPECT_EQ(params.validate(32000), std::nullopt);
  EXPECT_FALSE(params.greedy());
  EXPECT_FALSE(params.has_penalties());
  EXPECT_FALSE(params.top_k_enabled());
}

TEST(SamplingParamsTest, AcceptsBoundaryValues) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_k = -1;
  params.top_p = 1.0f;
  params.min_p = 1.0f;
  params.repetition_penalty = 0.01f;
  params.presence_penalty = -2.0f;
  params.frequency_penalty = 2.0f;
  params.max_tokens = 1;
  params.logprobs = SamplingParams::kMaxLogprobs;
  params.stop.assign(SamplingParams::kMaxStopStrings, "x");
  params.stop.push_back(std::string(SamplingParams::kMaxStopStringBytes, 'y'));
  params.stop.erase(params.stop.begin());
  params.stop_token_ids = {0, 31999};
  EXPECT_EQ(params.validate(32000), std::nullopt);
  EXPECT_TRUE(params.greedy());
  EXPECT_TRUE(params.has_penalties());
  EXPECT_EQ(params.longest_stop_bytes(), SamplingParams::kMaxStopStringBytes);
}

TEST(SamplingParamsTest, GreedyBelowEpsilon) {
  SamplingParams params;
  params.temperature = 1e-6f;
  EXPECT_TRUE(params.greedy());
  params.temperature = 1e-4f;
  EXPECT_FALSE(params.greedy());
}

TEST(SamplingParamsTest, MessagesNameTheParameter) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(message_for([](auto& p) { p.temperature = -1.0f; }),
            "temperature must be a finite number >= 0, got -1");
  EXPECT_EQ(message_for([&](auto& p) { p.temperature = nan; }),
            "temperature must be a finite number >= 0, got nan");
  EXPECT_EQ(message_for([&](auto& p) { p.temperature = inf; }),
            "temperature must be a finite number >= 0, got inf");
  EXPECT_EQ(message_for([](auto& p) { p.top_k = -2; }),
            "top_k must be -1 or 0 (off) or >= 1, got -2");
  EXPECT_EQ(message_for([](auto& p) { p.top_p = 0.0f; }), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(message_for([](auto& p) { p.top_p = 1.5f; }), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(message_for([&](auto& p) { p.top_p = nan; }), "top_p must be in (0, 1], got nan");
  EXPECT_EQ(message_for([](auto& p) { p.min_p = -0.1f; }), "min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(message_for([](auto& p) { p.min_p = 1.1f; }), "min_p must be in [0, 1], got 1.1");
  EXPECT_EQ(message_for([](auto& p) { p.repetition_penalty = 0.0f; }),
            "repetition_penalty must be a finite number > 0, got 0");
  EXPECT_EQ(message_for([](auto& p) { p.repetition_penalty = -1.0f; }),
            "repetition_penalty must be a finite number > 0, got -1");
  EXPECT_EQ(message_for([](auto& p) { p.presence_penalty = 2.5f; }),
            "presence_penalty must be in [-2, 2], got 2.5");
  EXPECT_EQ(message_for([](auto& p) { p.frequency_penalty = -3.0f; }),
            "frequency_penalty must be in [-2, 2], got -3");
  EXPECT_EQ(message_for([](auto& p) { p.max_tokens = 0; }), "max_tokens must be >= 1, got 0");
  EXPECT_EQ(message_for([](auto& p) { p.logprobs = 21; }), "logprobs must be in [0, 20], got 21");
  EXPECT_EQ(message_for([](auto& p) { p.logprobs = -1; }), "logprobs must be in [0, 20], got -1");
}

TEST(SamplingParamsTest, StopStringMessages) {
  EXPECT_EQ(message_for([](auto& p) { p.stop.assign(17, "x"); }),
            "stop may hold at most 16 strings, got 17");
  EXPECT_EQ(message_for([](auto& p) { p.stop = {"a", ""}; }), "stop[1] must not be empty");
  EXPECT_EQ(message_for([](auto& p) { p.stop = {std::string(257, 'a')}; }),
            "stop[0] must be at most 256 bytes long, got 257");
  EXPECT_EQ(message_for([](auto& p) {
              p.stop = {"ok", "\xC3"};
            }),
            "stop[1] is not valid UTF-8");                        // truncated
  EXPECT_EQ(message_for([](auto& p) { p.stop = {"\xC0\xAF"}; }),  // overlong '/'
            "stop[0] is not valid UTF-8");
  EXPECT_EQ(message_for([](auto& p) { p.stop = {"\xED\xA0\x80"}; }),  // surrogate
            "stop[0] is not valid UTF-8");
  EXPECT_EQ(message_for([](auto& p) { p.stop = {"\x80"}; }), "stop[0] is not valid UTF-8");
  EXPECT_EQ(message_for([](auto& p) {
              p.stop = {"caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
            }),
            "");
}

TEST(SamplingParamsTest, StopTokenIdMessages) {
  EXPECT_EQ(message_for([](auto& p) {
              p.stop_token_ids = {1, -5};
            }),
            "stop_token_ids[1] must be >= 0, got -5");
  EXPECT_EQ(message_for([](auto& p) { p.stop_token_ids = {100}; }), "");
  EXPECT_EQ(message_for([](auto& p) { p.stop_token_ids = {100}; }, 100),
            "stop_token_ids[0] must be in [0, 100), got 100");
  EXPECT_EQ(message_for([](auto& p) { p.stop_token_ids.assign(65, 1); }),
            "stop_token_ids may hold at most 64 ids, got 65");
}

}  // namespace
}  // namespace tokamak
