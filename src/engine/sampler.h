#pragma once
// Sampler: turns one row of logits into one token, for one sequence.
//
// Each sequence owns a Sampler (its seeded RNG and its token counts for penalties); the
// scratch memory for a vocabulary-sized sort lives in a SamplerWorkspace that all samplers on
// one thread share, so per-sequence memory stays small. After the first call on a workspace,
// sample() allocates nothing.
//
// sample() applies, in this order:
//
//   1. penalties, in place on `logits` (vLLM's order):
//        a. repetition (over prompt + accepted tokens): l > 0 ? l / r : l * r
//        b. frequency  (over accepted tokens):          l -= frequency * count
//        c. presence   (over accepted tokens):          l -= presence * (count > 0)
//      -- log-probabilities are taken here: log_softmax(penalised logits) --
//   2. greedy (temperature < kGreedyTemperature): argmax, ties to the lowest token id. Done.
//   3. top-k:        keep the k largest logits (ties to the lowest id). Done before the
//                    temperature, which keeps the ranking, so dropped tokens cost no exp().
//   4. temperature:  weight w = exp((l - max) / T): unnormalised probabilities, max weight 1
//   5. top-p:        keep the smallest set of most likely tokens (ties to the lowest id)
//                    whose weights sum to >= top_p * (sum over the tokens top-k kept)
//   6. min-p:        keep weights >= min_p * max weight (relative to the max probability)
//   7. draw:         one uniform u in [0, 1) from the RNG; the first kept token whose running
//                    sum of weights exceeds u * (sum of kept weights)
//
// Steps 3-7 are the functions of sampling_filters.h. The walk order of step 7 (token order
// without top-k / top-p, sorted after top-k, the selection's order after top-p alone) and
// every rounding are fixed by our code, so a seed gives the same tokens on every run and
// platform: Rng (xoshiro256**) draws one uniform per non-greedy sample() and none for greedy,
// and exp() is exp_nonpositive (fast_exp.h), plain float arithmetic rather than libm.
//
// Log-probabilities are those of the distribution after penalties, before temperature and
// filters: they describe the (penalised) model rather than the sampling knobs, so they are
// comparable across requests with different temperature / top-p, and a greedy request gets
// meaningful ones. OpenAI's logprobs likewise do not change with temperature. (vLLM v1
// reports the log-softmax of the raw logits by default, before penalties too; vLLM v0
// reported them after penalties and temperature.)
//
// Cost per call with V = vocab size, none allocating: penalties O(distinct seen tokens);
// greedy O(V); temperature O(V) vectorised exp; top-k O(V log k) (a heap where nearly every
// token costs one comparison; nth_element for k > V/16); top-p an expected O(V) selection
// by mass over the tokens that could survive it (others dropped by a safe bound in one pass);
// min-p and the draw O(V); log-probabilities O(V log N).

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/rng.h"
#include "engine/sampling_filters.h"
#include "engine/sampling_params.h"

namespace tokamak {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // natural log; -inf for a token the penalised logits rule out
};

// The log-probabilities reported with one sampled token. Fixed capacity: filling it
// allocates nothing.
struct SampleLogprobs {
  TokenLogprob sampled;
  // The top min(logprobs, vocab) tokens, most likely first, ties to the lowest id.
  std::array<TokenLogprob, SamplingParams::kMaxLogprobs> top_storage{};
  int32_t num_top = 0;

  std::span<const TokenLogprob> top() const {
    return {top_storage.data(), static_cast<size_t>(num_top)};
  }
};

// Scratch memory for sample(): one per thread that samples. Grows to the largest vocabulary
// it has seen (12 bytes per token: 1.8 MB for 150k tokens) and is then reused.
class SamplerWorkspace {
 public:
  // Allocates for `vocab_size` now (at engine start) rather than on the first sample().
  void reserve(int32_t vocab_size) {
    candidates(vocab_size);
    weights(vocab_size);
  }

  // The first `vocab_size` entries of each array; allocated only when vocab_size grows.
  std::span<Candidate> candidates(int32_t vocab_size);
  std::span<float> weights(int32_t vocab_size);

 private:
  std::vector<Candidate> candidates_;  // (vocab)
  std::vector<float> weights_;         // (vocab)
};

class Sampler {
 public:
  // Checks params.validate(vocab_size), vocab_size >= 1 and that every prompt token lies in
  // [0, vocab_size); throws tokamak::Error naming the problem. `prompt_tokens` are counted for
  // the repetition penalty only (presence / frequency look at generated tokens).
  Sampler(const SamplingParams& params, int32_t vocab_size,
          std::span<const int32_t> prompt_tokens = {});

  // Picks the next token from `logits` (vocab_size floats, finite or -inf, none NaN).
  // `logits` is modified: on return it holds the penalised logits (step 1 above).
  // With `logprobs`, fills it with the sampled token's log-probability and the top
  // params.logprobs alternatives (none if params.logprobs is absent or 0).
  // Does not count the token: call accept() with the token the sequence keeps.
  int32_t sample(std::span<float> logits, SamplerWorkspace& workspace,
                 SampleLogprobs* logprobs = nullptr);

  // Records a token appended to the sequence (for the penalties). `token` in [0, vocab_size).
  void accept(int32_t token);

  // The seed in use: params.seed, or the one drawn at construction (for logs and replays).
  uint64_t seed() const { return seed_; }
  int32_t vocab_size() const { return vocab_size_; }
  int32_t num_accepted() const { return num_accepted_; }

 private:
  void apply_penalties(std::span<float> logits) const;
  int32_t draw(std::span<const float> logits, SamplerWorkspace& workspace);
  void fill_logprobs(std::span<const float> logits, int32_t token, SampleLogprobs& out) const;
  void note_seen(int32_t token);

  int32_t vocab_size_;
  bool greedy_;
  float temperature_;
  int32_t top_k_;  // 0 = off (also when >= vocab_size)
  float top_p_;
  float min_p_;
  float repetition_penalty_;
  float presence_penalty_;
  float frequency_penalty_;
  int32_t num_logprobs_;  // top alternatives to report, <= min(kMaxLogprobs, vocab_size)
  uint64_t seed_;
  Rng rng_;
  int32_t num_accepted_ = 0;

  // Only allocated when a penalty is on (5 bytes per vocabulary entry).
  std::vector<uint8_t> seen_;          // (vocab): 1 if the token is in seen_ids_
  std::vector<int32_t> seen_ids_;      // distinct tokens that penalties act on
  std::vector<int32_t> output_count_;  // (vocab): times accepted
};

}  // namespace tokamak
