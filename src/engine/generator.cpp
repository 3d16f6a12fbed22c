#include "engine/generator.h"

#include <algorithm>

#include "core/error.h"
#include "engine/stop_checker.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

double GenerationStats::prefill_tokens_per_s() const {
  const int32_t computed = prompt_tokens - reused_tokens;
  return prefill_ms > 0 ? computed * 1000.0 / prefill_ms : 0.0;
}

double GenerationStats::decode_tokens_per_s() const {
  return decode_ms > 0 && generated_tokens > 1 ? (generated_tokens - 1) * 1000.0 / decode_ms : 0.0;
}

double GenerationStats::tpot_ms() const {
  return generated_tokens > 1 ? decode_ms / (generated_tokens - 1) : 0.0;
}

Generator::Generator(Model& model, const Tokenizer& tokenizer, int32_t n_ctx)
    : model_(model),
      tokenizer_(tokenizer),
      kv_(model.new_kv_cache(n_ctx)),
      logits_(static_cast<size_t>(model.hparams().n_vocab)) {
  if (tokenizer.n_vocab() > model.hparams().n_vocab) {
    throw Error("the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                " tokens but the model only " + std::to_string(model.hparams().n_vocab));
  }
}

Generator::~Generator() = default;

int32_t Generator::n_ctx() const {
  return kv_->n_ctx();
}

void Generator::reset() {
  kv_->clear();
  cached_.clear();
}

void Generator::prefill(std::span<const int32_t> tokens) {
  const int32_t chunk = model_.max_batch_tokens();
  std::vector<int32_t> positions(static_cast<size_t>(chunk));
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(chunk)) {
    const size_t n = std::min(tokens.size() - start, static_cast<size_t>(chunk));
    const int32_t pos0 = kv_->size();
    for (size_t i = 0; i < n; ++i) positions[i] = pos0 + static_cast<int32_t>(i);
    // Only the final chunk's last row is sampled from; earlier chunks' logits are overwritten.
    const int32_t last_row = static_cast<int32_t>(n) - 1;
    model_.forward(
        {tokens.subspan(start, n), std::span(positions).first(n), std::span(&last_row, 1)}, *kv_,
        logits_);
    cached_.insert(cached_.end(), tokens.begin() + static_cast<ptrdiff_t>(start),
                   tokens.begin() + static_cast<ptrdiff_t>(start + n));
  }
}

void Generator::decode(int32_t token) {
  const int32_t pos = kv_->size();
  const int32_t row = 0;
  model_.forward({std::span(&token, 1), std::span(&pos, 1), std::span(&row, 1)}, *kv_, logits_);
  cached_.push_back(token);
}

GenerationResult Generator::generate(std::span<const int32_t> prompt, const SamplingParams& params,
                                     const std::function<bool(std::string_view)>& on_text) {
  if (prompt.empty()) throw Error("the prompt is empty");
  if (static_cast<int64_t>(prompt.size()) >= kv_->n_ctx()) {
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                std::to_string(kv_->n_ctx()) + " (raise -c/--ctx-size or shorten the prompt)");
  }
  // The sampler validates the parameters (throwing Error) before any work is done.
  Sampler sampler(params, model_.hparams().n_vocab, prompt);

  const auto t0 = Clock::now();
  GenerationResult result;
  auto& stats = result.stats;
  stats.prompt_tokens = static_cast<int32_t>(prompt.size());

  // Reuse the cached K/V of the longest common prefix, but always recompute at least the
  // last prompt token: its logits are what the first sample needs.
  size_t common = 0;
  while (common < cached_.size() && common + 1 < prompt.size() &&
         cached_[common] == prompt[common]) {
    ++common;
  }
  kv_->truncate(static_cast<int32_t>(common));
  cached_.resize(common);
  stats.reused_tokens = static_cast<int32_t>(common);
  prefill(prompt.subspan(common));
  stats.prefill_ms = ms_since(t0);

  Detokenizer detokenizer(tokenizer_);
  StopChecker stops(params.stop);
  const int32_t room = kv_->n_ctx() - static_cast<int32_t>(prompt.size());
  const int32_t max_tokens = std::min(params.max_tokens.value_or(room), room);

  auto emit = [&](const std::string& text) {
    if (text.empty()) return true;
    result.text += text;
    return !on_text || on_text(text);
  };

  Clock::time_point first_token_time;
  result.finish = FinishReason::Length;
  while (stats.generated_tokens < max_tokens) {
    const int32_t token = sampler.sample(logits_, workspace_);
    sampler.accept(token);
    result.tokens.push_back(token);
    ++stats.generated_tokens;
    if (stats.generated_tokens == 1) {
      first_token_time = Clock::now();
      stats.ttft_ms = ms_since(t0);
    }

    const bool end_token = (!params.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
                           std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(),
                                     token) != params.stop_token_ids.end();
    if (end_token) {
      result.finish = FinishReason::Stop;
      break;
    }
    auto checked = stops.push(detokenizer.push(token));
    if (!emit(checked.emit)) {
      result.finish = FinishReason::Cancelled;
      break;
    }
    if (checked.stopped) {
      result.finish = FinishReason::Stop;
      break;
    }
    if (stats.generated_tokens == max_tokens) break;
    decode(token);
  }
  if (result.finish != FinishReason::Cancelled && !stops.stopped()) {
    // Bytes the detokenizer held back may still complete a stop string.
    auto tail = stops.push(detokenizer.flush());
    emit(tail.emit);
    if (tail.stopped) {
      result.finish = FinishReason::Stop;
    } else {
      emit(stops.flush());
    }
  }
  if (stats.generated_tokens > 0) {
    stats.decode_ms = ms_since(first_token_time);
  }
  return result;
}

}  // namespace tokamak
