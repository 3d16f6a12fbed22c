#pragma once
// Single-sequence text generation: the loop behind `tokamak run` and `tokamak chat`.
// prefill (in chunks of the model's batch size) -> sample -> decode one token a step, with
// text streamed through an incremental detokenizer and stop-string checker. The serving
// engine (continuous batching over many sequences) is a separate piece; this one keeps a
// single KV cache and reuses it across calls when the new prompt extends the old tokens
// (multi-turn chat re-sends the whole conversation).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace tokamak {

class Model;
class KVCache;
class Tokenizer;

struct GenerationStats {
  int32_t prompt_tokens = 0;     // tokens of the prompt
  int32_t reused_tokens = 0;     // of which were already in the cache (not recomputed)
  int32_t generated_tokens = 0;  // tokens sampled (the stop token included)
  double prefill_ms = 0;         // prefill forward time
  double ttft_ms = 0;            // from the call to the first sampled token
  double decode_ms = 0;          // from the first sampled token to the last

  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;  // over the tokens after the first
  double tpot_ms() const;              // mean time per output token after the first
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids
  std::string text;             // generated text, stop string excluded
  FinishReason finish = FinishReason::Length;
  GenerationStats stats;
};

class Generator {
 public:
  // `n_ctx` positions of KV cache (0 = the model's default).
  Generator(Model& model, const Tokenizer& tokenizer, int32_t n_ctx = 0);
  ~Generator();

  int32_t n_ctx() const;

  // Generates a continuation of `prompt` (token ids, BOS included if wanted). Text is passed
  // to `on_text` as soon as it is final; `on_text` returns false to cancel. Throws Error if
  // the prompt is empty or does not leave room for one token in the context.
  GenerationResult generate(std::span<const int32_t> prompt, const SamplingParams& params,
                            const std::function<bool(std::string_view)>& on_text = {});

  // Forgets the cached tokens.
  void reset();

 private:
  void prefill(std::span<const int32_t> tokens);  // leaves the last row's logits in logits_
  void decode(int32_t token);

  Model& model_;
  const Tokenizer& tokenizer_;
  std::unique_ptr<KVCache> kv_;
  std::vector<int32_t> cached_;  // tokens whose K/V are in kv_, in order
  std::vector<float> logits_;    // (n_vocab)
  SamplerWorkspace workspace_;
};

}  // namespace tokamak
