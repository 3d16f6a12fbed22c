#include "engine/model_runner.h"

#include <cassert>

#include "kv/paged_kv_cache.h"
#include "model/model.h"

namespace tokamak {

ModelRunner::ModelRunner(Model& model, int32_t max_batched_tokens, int32_t max_seqs,
                         bool track_attention)
    : model_(model),
      n_vocab_(model.hparams().n_vocab),
      track_attention_(track_attention),
      rows_(max_batched_tokens, max_seqs) {
  const auto s = static_cast<size_t>(max_seqs);
  logit_rows_.reserve(s);
  logits_.resize(s * static_cast<size_t>(n_vocab_));
}

std::span<float> ModelRunner::execute(const StepPlan& plan, PagedKVCache& kv) {
  assert(!plan.empty());
  rows_.clear();
  logit_rows_.clear();
  for (const ScheduledSeq& s : plan.seqs) {
    const int32_t last = rows_.add(*s.seq, s.n_tokens, kv, track_attention_);
    if (s.sample) logit_rows_.push_back(last);
  }
  const std::span<float> logits =
      std::span(logits_).first(logit_rows_.size() * static_cast<size_t>(n_vocab_));
  model_.forward(rows_.batch(logit_rows_), kv, logits);
  return logits;
}

}  // namespace tokamak
