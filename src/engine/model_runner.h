#pragma once
// ModelRunner: turns a StepPlan into one RaggedBatch, runs the model's forward over it, and
// hands back one logits row per sampled sequence. All buffers are sized at construction
// (max_batched_tokens rows, max_seqs sequences) and reused: a step allocates nothing.

#include <cstdint>
#include <span>
#include <vector>

#include "core/paged_kv_view.h"
#include "engine/scheduler.h"
#include "engine/step_rows.h"

namespace tokamak {

class Model;
class PagedKVCache;

class ModelRunner {
 public:
  // track_attention: every forward adds its softmax weights per block to each scheduled
  // sequence's Sequence::block_mass (heavy-hitter eviction, engine/kv_heavy.h).
  ModelRunner(Model& model, int32_t max_batched_tokens, int32_t max_seqs,
              bool track_attention = false);

  // Runs `plan` (non-empty). Row i of the result is the logits of the i-th sampled entry
  // of plan.seqs, in plan order; valid until the next execute().
  std::span<float> execute(const StepPlan& plan, PagedKVCache& kv);
  int32_t n_vocab() const { return n_vocab_; }
  std::span<float> row(int32_t i) {
    return std::span(logits_).subspan(static_cast<size_t>(i) * n_vocab_, n_vocab_);
  }

 private:
  Model& model_;
  int32_t n_vocab_;
  bool track_attention_;
  StepRows rows_;
  std::vector<int32_t> logit_rows_;
  std::vector<float> logits_;  // (max sampled rows, n_vocab)
};

}  // namespace tokamak
