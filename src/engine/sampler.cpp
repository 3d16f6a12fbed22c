#include "engine/sampler.h"

#include <algorithm>
#include <cassert>
#include <random>
#include <string>

#include "core/error.h"

namespace tokamak {
namespace {

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

}  // namespace

std::span<Candidate> SamplerWorkspace::candidates(int32_t vocab_size) {
  assert(vocab_size >= 1);
  const auto size = static_cast<size_t>(vocab_size);
  if (candidates_.size() < size) candidates_.resize(size);
  return {candidates_.data(), size};
}

std::span<float> SamplerWorkspace::weights(int32_t vocab_size) {
  assert(vocab_size >= 1);
  const auto size = static_cast<size_t>(vocab_size);
  if (weights_.size() < size) weights_.resize(size);
  return {weights_.data(), size};
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size,
                 std::span<const int32_t> prompt_tokens)
    : vocab_size_(vocab_size),
      greedy_(params.greedy()),
      temperature_(params.temperature),
      top_k_(params.top_k_enabled() && params.top_k < vocab_size ? params.top_k : 0),
      top_p_(params.top_p),
      min_p_(params.min_p),
      repetition_penalty_(params.repetition_penalty),
      presence_penalty_(params.presence_penalty),
      frequency_penalty_(params.frequency_penalty),
      num_logprobs_(std::min(params.logprobs.value_or(0), vocab_size)),
      seed_(params.seed ? *params.seed : random_seed()),
      rng_(seed_) {
  if (vocab_size < 1) {
    throw Error("sampler: vocab size must be >= 1, got " + std::to_string(vocab_size));
  }
  if (auto message = params.validate(vocab_size)) throw Error(*message);
  for (const int32_t token : prompt_tokens) {
    if (token < 0 || token >= vocab_size) {
      throw Error("prompt token id " + std::to_string(token) + " is outside the vocabulary [0, " +
                  std::to_string(vocab_size) + ")");
    }
  }
  if (!params.has_penalties()) return;

  const auto size = static_cast<size_t>(vocab_size);
  seen_.assign(size, 0);
  output_count_.assign(size, 0);
  // Prompt tokens matter only to the repetition penalty.
  const size_t prompt_seen = repetition_penalty_ != 1.0f ? prompt_tokens.size() : 0;
  const auto expected_output = static_cast<size_t>(params.max_tokens.value_or(1024));
  seen_ids_.reserve(std::min(size, prompt_seen + expected_output));
  if (repetition_penalty_ != 1.0f) {
    for (const int32_t token : prompt_tokens) note_seen(token);
  }
}

void Sampler::note_seen(int32_t token) {
  auto& seen = seen_[static_cast<size_t>(token)];
  if (!seen) {
    seen = 1;
    seen_ids_.push_back(token);
  }
}

void Sampler::accept(int32_t token) {
  assert(token >= 0 && token < vocab_size_);
  ++num_accepted_;
  if (seen_.empty()) return;  // no penalties
  note_seen(token);
  ++output_count_[static_cast<size_t>(token)];
}

void Sampler::apply_penalties(std::span<float> logits) const {
  for (const int32_t token : seen_ids_) {
    float& logit = logits[static_cast<size_t>(token)];
    if (repetition_penalty_ != 1.0f) {
      logit = logit > 0.0f ? logit / repetition_penalty_ : logit * repetition_penalty_;
    }
    const int32_t count = output_count_[static_cast<size_t>(token)];
    if (count > 0) {
      logit -= frequency_penalty_ * static_cast<float>(count);
      logit -= presence_penalty_;
    }
  }
}

int32_t Sampler::sample(std::span<float> logits, SamplerWorkspace& workspace,
                        SampleLogprobs* logprobs) {
  assert(logits.size() == static_cast<size_t>(vocab_size_));
  apply_penalties(logits);

  const int32_t token = greedy_ ? greedy_token(logits) : draw(logits, workspace);
  if (logprobs != nullptr) fill_logprobs(logits, token, *logprobs);
  return token;
}

int32_t Sampler::draw(std::span<const float> logits, SamplerWorkspace& workspace) {
  const double u = rng_.uniform();
  const std::span<Candidate> all = workspace.candidates(vocab_size_);
  std::span<Candidate> c;
  double mass = 0.0;
  if (top_k_ > 0) {
    c = all.first(top_k_candidates(logits, static_cast<size_t>(top_k_), all));
    mass = weigh_candidates(c, temperature_);
  } else {
    const std::span<float> weights = workspace.weights(vocab_size_);
    mass = weigh_logits(logits, temperature_, weights);
    if (top_p_ == 1.0f) {
      if (min_p_ > 0.0f) mass = min_p_weights(weights, min_p_);
      return pick(weights, mass, u);
    }
    // Only tokens that can survive top-p (and min-p, which follows) enter the selection.
    const float floor = std::max(top_p_negligible_weight(top_p_, mass, weights.size()), min_p_);
    c = all.first(gather_candidates(weights, floor, all));
  }
  if (top_p_ < 1.0f) {
    const Kept kept = top_p_filter(c, /*sorted=*/top_k_ > 0, top_p_, mass);
    c = c.first(kept.count);
    mass = kept.mass;
  }
  if (min_p_ > 0.0f) {
    const Kept kept = min_p_filter(c, min_p_);
    c = c.first(kept.count);
    mass = kept.mass;
  }
  return pick(c, mass, u);
}

void Sampler::fill_logprobs(std::span<const float> logits, int32_t token,
                            SampleLogprobs& out) const {
  // log_softmax(l)[i] = l[i] - log(sum(exp(l))).
  const double log_normalizer = log_sum_exp(logits);
  const auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) -
                              log_normalizer);
  };
  out.sampled = {token, logprob(token)};

  // Top N by insertion into a sorted array of logits; scanning ids upwards and displacing
  // only on a strictly larger logit sends ties to the lowest id. Most tokens cost one compare.
  const auto capacity = static_cast<size_t>(num_logprobs_);
  auto& top = out.top_storage;
  size_t count = 0;
  for (size_t i = 0; i < logits.size() && capacity > 0; ++i) {
    const float logit = logits[i];
    if (count == capacity && !(logit > top[count - 1].logprob)) continue;
    size_t at = count < capacity ? count++ : capacity - 1;
    while (at > 0 && logit > top[at - 1].logprob) {
      top[at] = top[at - 1];
      --at;
    }
    top[at] = {static_cast<int32_t>(i), logit};  // a logit until converted below
  }
  for (size_t i = 0; i < count; ++i) top[i].logprob = logprob(top[i].token);
  out.num_top = static_cast<int32_t>(count);
}

}  // namespace tokamak
