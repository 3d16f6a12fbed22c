#include "engine/model_runner.h"

#include <cassert>

#include "kv/paged_kv_cache.h"
#include "model/model.h"

namespace tokamak {

ModelRunner::ModelRunner(Model& model, int32_t max_batched_tokens, int32_t max_seqs,
                         bool track_attention)
    : model_(model), n_vocab_(model.hparams().n_vocab), track_attention_(track_attention) {
  const auto t = static_cast<size_t>(max_batched_tokens);
  const auto s = static_cast<size_t>(max_seqs);
  tokens_.resize(t);
  positions_.resize(t);
  slots_.resize(t);
  seqs_.reserve(s);
  logit_rows_.reserve(s);
  logits_.resize(s * static_cast<size_t>(n_vocab_));
}

std::span<float> ModelRunner::execute(const StepPlan& plan, PagedKVCache& kv) {
  assert(!plan.empty() && plan.n_tokens <= static_cast<int32_t>(tokens_.size()));
  const int64_t bs = kv.block_size();
  seqs_.clear();
  logit_rows_.clear();
  int32_t row = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    Sequence& seq = *s.seq;
    const int32_t start = seq.n_computed;
    for (int32_t i = 0; i < s.n_tokens; ++i) {
      const int32_t pos = start + i;
      const auto r = static_cast<size_t>(row + i);
      tokens_[r] = seq.tokens[static_cast<size_t>(pos)];
      positions_[r] = pos;
      slots_[r] = int64_t{seq.block_table[static_cast<size_t>(pos / bs)]} * bs + pos % bs;
    }
    float* mass = nullptr;
    if (track_attention_) {
      seq.block_mass.resize(seq.block_table.size(), 0.0f);
      mass = seq.block_mass.data();
    }
    seqs_.push_back({row, s.n_tokens, start + s.n_tokens, seq.block_table.data(), mass});
    row += s.n_tokens;
    if (s.sample) logit_rows_.push_back(row - 1);
  }
  const auto n = static_cast<size_t>(row);
  const std::span<float> logits =
      std::span(logits_).first(logit_rows_.size() * static_cast<size_t>(n_vocab_));
  model_.forward(RaggedBatch{std::span(tokens_).first(n), std::span(positions_).first(n),
                             std::span(slots_).first(n), seqs_, logit_rows_},
                 kv, logits);
  return logits;
}

}  // namespace tokamak
