#include "engine/kv_window.h"

#include <algorithm>
#include <cassert>

#include "engine/block_manager.h"
#include "engine/kv_heavy.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace tokamak {

KVWindow::KVWindow(int32_t window, int32_t sink, int32_t block_size, int32_t heavy)
    : window_(window),
      sink_blocks_((sink + block_size - 1) / block_size),
      block_size_(block_size),
      heavy_blocks_(heavy / block_size) {
  assert(block_size >= 1 && window >= block_size && sink >= 0);
  assert(heavy >= 0 && heavy <= window - block_size);
}

int32_t KVWindow::slide(Sequence& seq, BlockManager& blocks, Model& model) const {
  if (seq.swapped()) return 0;  // its blocks come back first
  const int32_t bs = block_size_;
  const int32_t sink = sink_tokens();
  // Whole blocks past the sink that can go with `window` computed tokens left after them.
  const int32_t n_drop = std::max(0, (seq.n_computed - sink - window_) / bs);
  if (n_drop == 0) return 0;
  // Table indices of the blocks to drop, ascending: the oldest past the sink, or the least
  // attended of the blocks past the sink that end before the last window - heavy tokens.
  std::vector<int32_t> drop;
  if (heavy_blocks_ == 0) {
    for (int32_t i = 0; i < n_drop; ++i) drop.push_back(sink_blocks_ + i);
  } else {
    const int32_t recent = window_ - heavy_tokens();
    const int32_t candidates_end = (seq.n_computed - recent) / bs;
    drop = heavy_hitter_drops(seq.block_mass, sink_blocks_, candidates_end, n_drop);
  }
  // Hot copies only of what later queries read, so that none is of a block dropped here.
  blocks.trim_hot(seq);
  // Blocks holding computed tokens; those after the first dropped one move down.
  const int32_t n_held = (seq.n_computed + bs - 1) / bs;
  assert(static_cast<size_t>(n_held) <= seq.block_table.size() && drop.back() < n_held);

  // The moved blocks are rewritten (re-rotated): they must be this sequence's alone.
  for (int32_t i = drop.front() + 1; i < n_held; ++i) {
    if (!std::binary_search(drop.begin(), drop.end(), i) && !blocks.make_block_exclusive(seq, i)) {
      return 0;
    }
  }
  // Each run of kept blocks between two dropped ones moves down by the tokens dropped before
  // it: one re-rotation per run.
  for (size_t d = 0; d < drop.size(); ++d) {
    const int32_t run_begin = drop[d] + 1;
    const int32_t run_end = d + 1 < drop.size() ? drop[d + 1] : n_held;
    if (run_begin >= run_end) continue;
    const int32_t rows = std::min(seq.n_computed, run_end * bs) - run_begin * bs;
    const int32_t delta = -bs * static_cast<int32_t>(d + 1);
    model.shift_kv_positions(
        blocks.cache(),
        std::span(seq.block_table).subspan(static_cast<size_t>(run_begin),
                                           static_cast<size_t>(run_end - run_begin)),
        0, rows, delta);
    // Their hot copies (kv/paged_kv_cache.h), which attention reads for the newest blocks,
    // move with them.
    const int32_t hot_begin = std::max(run_begin, seq.hot_first);
    const int32_t hot_end =
        std::min(run_end, seq.hot_first + static_cast<int32_t>(seq.hot_table.size()));
    if (blocks.cache().hot() != nullptr && hot_begin < hot_end) {
      model.shift_kv_positions(
          *blocks.cache().hot(),
          std::span(seq.hot_table)
              .subspan(static_cast<size_t>(hot_begin - seq.hot_first),
                       static_cast<size_t>(hot_end - hot_begin)),
          0, std::min(seq.n_computed, hot_end * bs) - hot_begin * bs, delta);
    }
  }
  // Drop from the back, so the indices still to drop stay valid.
  const int32_t n_prompt = seq.n_prompt;
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
    const int32_t i = *it;
    blocks.drop_blocks(seq, i, 1);
    const auto from = seq.tokens.begin() + int64_t{i} * bs;
    seq.tokens.erase(from, from + bs);
    seq.n_prompt -= std::clamp(n_prompt - i * bs, 0, bs);
    if (static_cast<size_t>(i) < seq.block_mass.size()) {
      seq.block_mass.erase(seq.block_mass.begin() + i);
    }
  }
  // Hot copies are of the newest blocks, never dropped ones (the window is at least as wide
  // as the hot window): their entries move down with the rest.
  assert(seq.hot_table.empty() || drop.back() < seq.hot_first);
  if (!seq.hot_table.empty()) seq.hot_first -= n_drop;
  const int32_t dropped = n_drop * bs;
  seq.n_computed -= dropped;
  seq.n_evicted += dropped;
  return dropped;
}

}  // namespace tokamak
