#pragma once
// The output side of one sample: its sampler (seeded RNG, penalty counts), the incremental
// detokenizer and stop-string checker that turn its tokens into text, its limits and its
// metrics. Owned by the Sequence; used only by EngineCore.

#include <cstdint>
#include <span>
#include <utility>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "tokenizer/detokenizer.h"

namespace tokamak {

struct SampleState {
  SampleState(const SamplingParams& p, int32_t n_vocab, std::span<const int32_t> prompt,
              const Tokenizer& tokenizer, int32_t max_output_tokens)
      : params(p),
        sampler(p, n_vocab, prompt),
        detokenizer(tokenizer),
        stops(p.stop),
        max_tokens(max_output_tokens) {}

  SamplingParams params;  // this sample's own copy (its seed may differ from the request's)
  Sampler sampler;
  Detokenizer detokenizer;
  StopChecker stops;
  int32_t max_tokens;  // output tokens allowed: max_tokens capped by max_model_len
  SampleMetrics metrics;
  bool finished = false;
};

}  // namespace tokamak
