#include "engine/kv_window.h"

#include <algorithm>
#include <cassert>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace tokamak {

KVWindow::KVWindow(int32_t window, int32_t sink, int32_t block_size)
    : window_(window), sink_blocks_((sink + block_size - 1) / block_size), block_size_(block_size) {
  assert(block_size >= 1 && window >= block_size && sink >= 0);
}

int32_t KVWindow::slide(Sequence& seq, BlockManager& blocks, Model& model) const {
  if (seq.swapped()) return 0;  // its blocks come back first
  const int32_t bs = block_size_;
  const int32_t sink = sink_tokens();
  // Whole blocks past the sink that can go with `window` computed tokens left after them.
  const int32_t n_drop = std::max(0, (seq.n_computed - sink - window_) / bs);
  if (n_drop == 0) return 0;
  const int32_t first_kept = sink_blocks_ + n_drop;  // table index of the first block kept
  const int32_t kept_rows = seq.n_computed - first_kept * bs;
  assert(kept_rows >= window_);
  const auto n_kept_blocks = static_cast<int32_t>((kept_rows + bs - 1) / bs);
  assert(static_cast<size_t>(first_kept + n_kept_blocks) <= seq.block_table.size());

  // The kept blocks are rewritten (re-rotated): they must be this sequence's alone.
  for (int32_t i = first_kept; i < first_kept + n_kept_blocks; ++i) {
    if (!blocks.make_block_exclusive(seq, i)) return 0;
  }
  const int32_t dropped = n_drop * bs;
  model.shift_kv_positions(blocks.cache(),
                           std::span(seq.block_table).subspan(static_cast<size_t>(first_kept)), 0,
                           kept_rows, -dropped);
  blocks.drop_blocks(seq, sink_blocks_, n_drop);
  const auto from = seq.tokens.begin() + sink;
  seq.tokens.erase(from, from + dropped);
  seq.n_prompt -= std::clamp(seq.n_prompt - sink, 0, dropped);
  seq.n_computed -= dropped;
  seq.n_evicted += dropped;
  return dropped;
}

}  // namespace tokamak
