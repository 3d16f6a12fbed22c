#pragma once
// StepRows: the rows of one forward (model/ragged_batch.h) built from sequences, each
// bringing its next n tokens: token ids, positions, cache slots, its SeqAttention, and with a
// hot window (kv/paged_kv_cache.h) the hot slots and the blocks the step fills. Buffers are
// sized once and reused, so a step allocates nothing. ModelRunner builds every engine step
// with it, and the perplexity drivers their chunks, so the forward is fed the same way.

#include <cstdint>
#include <span>
#include <vector>

#include "core/paged_kv_view.h"
#include "model/ragged_batch.h"

namespace tokamak {

class PagedKVCache;
struct Sequence;

class StepRows {
 public:
  // At most max_tokens rows and max_seqs sequences per step.
  StepRows(int32_t max_tokens, int32_t max_seqs);

  void clear();
  // Appends seq's tokens [n_computed, n_computed + n), whose blocks (and hot copies) are
  // allocated; with track_attention its Sequence::block_mass is grown to its table and
  // named in its SeqAttention. Returns the row of its last token.
  int32_t add(Sequence& seq, int32_t n, const PagedKVCache& kv, bool track_attention);
  int32_t n_rows() const { return n_rows_; }

  // The forward's input over the rows added, logits wanted at logit_rows; valid until the
  // next clear() or add().
  RaggedBatch batch(std::span<const int32_t> logit_rows) const;

 private:
  int32_t n_rows_ = 0;
  bool hot_ = false;
  std::vector<int32_t> tokens_;        // (max_tokens)
  std::vector<int32_t> positions_;     // (max_tokens)
  std::vector<int64_t> slots_;         // (max_tokens)
  std::vector<int64_t> hot_slots_;     // (max_tokens) with a hot window
  std::vector<KVBlockEncode> filled_;  // (<= max_tokens + max_seqs) with a hot window
  std::vector<SeqAttention> seqs_;     // (max_seqs)
};

}  // namespace tokamak
