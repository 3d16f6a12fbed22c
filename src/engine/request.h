#pragma once
// What a client hands the engine (Request) and what it gets back (RequestOutput), as plain
// values: the engine knows nothing of HTTP, and the server nothing of scheduling.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace tokamak {

using Clock = std::chrono::steady_clock;

enum class FinishReason { Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled", "error"

struct Request {
  static constexpr int32_t kMaxSamples = 16;

  std::vector<int32_t> prompt;  // token ids, BOS included if wanted; not empty
  SamplingParams params;        // per request: each sample of it keeps its own copy
  // Samples of the prompt (OpenAI's n): they share the prompt's KV blocks. With a seed,
  // sample i uses seed + i, so the samples differ and a rerun repeats them.
  int32_t n = 1;
  // Lower runs first; equal priorities run in arrival order (FCFS). Also decides who is
  // preempted first when the KV pool runs out: the last in that order.
  int32_t priority = 0;
};

// The life of one sample, complete on its final RequestOutput.
struct SampleMetrics {
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;          // tokens sampled (a stop token included)
  int32_t preemptions = 0;            // times it was preempted and resumed
  Clock::time_point arrival;          // submit()
  Clock::time_point first_scheduled;  // first step that computed any of its tokens
  Clock::time_point first_token;      // first output token sampled
  Clock::time_point finished;
  std::vector<Clock::time_point> token_times;  // when each output token was sampled
  // Prompt tokens whose K/V came from the prefix cache when it was first admitted: its
  // leading cached full blocks, but never the last prompt token (always computed, for its
  // logits). 0 with the cache off or when it ended before admission. A resumption after
  // preemption leaves it as it was; forked samples report their parent's.
  int32_t cached_prompt_tokens = 0;
};

// One event of one sample's stream: new tokens and the text they complete, and, on the last
// event of the sample, why it ended and its metrics. A sample's events arrive in order; the
// samples of one request interleave.
struct RequestOutput {
  uint64_t request_id = 0;
  int32_t index = 0;               // which sample (0 .. n-1)
  std::vector<int32_t> token_ids;  // tokens sampled since the previous event (may be empty)
  std::string text;                // text they completed (stop strings cut off)
  // With params.logprobs: one entry per token in token_ids.
  std::vector<SampleLogprobs> logprobs;
  Clock::time_point time;  // when this event was made
  std::optional<FinishReason> finish;
  std::string error;                     // what went wrong, when finish == Error
  std::optional<SampleMetrics> metrics;  // set with finish
};

}  // namespace tokamak
