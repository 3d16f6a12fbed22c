#include "engine/step_rows.h"

#include <cassert>

#include "engine/sequence.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {

StepRows::StepRows(int32_t max_tokens, int32_t max_seqs) {
  const auto t = static_cast<size_t>(max_tokens);
  tokens_.resize(t);
  positions_.resize(t);
  slots_.resize(t);
  hot_slots_.resize(t);
  // A step's tokens fill at most one block each; every sequence's first may end one more.
  filled_.reserve(t + static_cast<size_t>(max_seqs));
  seqs_.reserve(static_cast<size_t>(max_seqs));
}

void StepRows::clear() {
  n_rows_ = 0;
  filled_.clear();
  seqs_.clear();
}

int32_t StepRows::add(Sequence& seq, int32_t n, const PagedKVCache& kv, bool track_attention) {
  assert(n >= 1 && static_cast<size_t>(n_rows_ + n) <= tokens_.size());
  assert(seqs_.size() < seqs_.capacity());
  const int64_t bs = kv.block_size();
  hot_ = kv.hot() != nullptr;
  const int32_t start = seq.n_computed;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = start + i;
    const auto r = static_cast<size_t>(n_rows_ + i);
    tokens_[r] = seq.tokens[static_cast<size_t>(pos)];
    positions_[r] = pos;
    slots_[r] = int64_t{seq.block_table[static_cast<size_t>(pos / bs)]} * bs + pos % bs;
    if (hot_) {
      hot_slots_[r] =
          int64_t{seq.hot_table[static_cast<size_t>(pos / bs - seq.hot_first)]} * bs + pos % bs;
    }
  }
  // With a hot window the main pool gets whole blocks: those whose last row is this step's.
  for (int64_t e = start / bs; hot_ && (e + 1) * bs <= start + n; ++e) {
    filled_.push_back({seq.hot_table[static_cast<size_t>(e - seq.hot_first)],
                       seq.block_table[static_cast<size_t>(e)]});
  }
  float* mass = nullptr;
  if (track_attention) {
    seq.block_mass.resize(seq.block_table.size(), 0.0f);
    mass = seq.block_mass.data();
  }
  seqs_.push_back({n_rows_, n, start + n, seq.block_table.data(), mass,
                   hot_ ? seq.hot_table.data() : nullptr, seq.hot_first});
  n_rows_ += n;
  return n_rows_ - 1;
}

RaggedBatch StepRows::batch(std::span<const int32_t> logit_rows) const {
  const auto n = static_cast<size_t>(n_rows_);
  return RaggedBatch{
      std::span(tokens_).first(n),
      std::span(positions_).first(n),
      std::span(slots_).first(n),
      seqs_,
      logit_rows,
      hot_ ? std::span<const int64_t>(hot_slots_).first(n) : std::span<const int64_t>(),
      filled_};
}

}  // namespace tokamak
