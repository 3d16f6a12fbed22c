#pragma once
// KVWindow: bounded KV memory per sequence, the StreamingLLM way (Xiao et al., "Efficient
// Streaming Language Models with Attention Sinks"): keep the first `sink` tokens (whole
// blocks), whose keys soak up attention mass the model puts there whatever they say, and
// the most recent `window` tokens; drop whole blocks in between as the sequence grows, so a
// generation can run past the model's context with a cache that never grows beyond
// sink + window + one step's tokens.
//
//   before   | sink | b1 | b2 | b3 | b4 | b5 (being filled) |   cache positions 0 .. n
//   drop b1  | sink | b2 | b3 | b4 | b5 |                       b2.. move down one block
//
// Positions are those in the cache, as the paper prescribes: the dropped tokens leave
// `Sequence::tokens` too (a token's index there stays its position), and the keys kept
// after the gap are re-rotated by -block_size x dropped blocks (Model::shift_kv_positions),
// so relative distances stay within what the model was trained on. Kept blocks that other
// sequences share (n > 1 samples, the prefix cache) are copied first; a slide that cannot
// get those copies waits for a later step.
//
// With `heavy` > 0 (engine/kv_heavy.h, H2O), `heavy` of the window's tokens (whole blocks)
// are kept for the attention they received rather than their age: the blocks dropped are the
// least-attended among those older than the last window - heavy tokens. Blocks after a
// dropped one move down (re-rotated by -block_size x the blocks dropped before them).
//
// What a slid sequence attends to depends on when its blocks were dropped, hence on how its
// prompt was chunked: window mode gives up batch invariance for prompts longer than
// sink + window (decode steps slide one token at a time, the same alone or batched).

#include <cstdint>
#include <vector>

#include "engine/kv_eviction.h"

namespace tokamak {

class BlockManager;
class Model;
struct Sequence;

class KVWindow final : public KVEvictionPolicy {
 public:
  // window >= block_size tokens; sink >= 0 tokens (kept in whole blocks: rounded up); heavy
  // in [0, window - block_size] tokens (kept in whole blocks: rounded down; 0 = off).
  KVWindow(int32_t window, int32_t sink, int32_t block_size, int32_t heavy = 0);

  int32_t window() const { return window_; }
  int32_t sink_tokens() const { return sink_blocks_ * block_size_; }
  int32_t heavy_tokens() const { return heavy_blocks_ * block_size_; }
  // Whether slide() needs Sequence::block_mass kept up to date by every attention call.
  bool tracks_attention() const override { return heavy_blocks_ > 0; }
  // Most tokens a sequence's cache holds before a step of at most `step_tokens` tokens is
  // computed: the sink, the window, a partly filled block, and the step.
  int64_t max_cache_tokens(int32_t step_tokens) const override {
    return int64_t{sink_tokens()} + window_ + block_size_ + step_tokens;
  }

  // Drops seq's blocks past the sink while more than `window` computed tokens would remain
  // after them: the oldest, or with `heavy` the least attended. Returns the tokens dropped
  // (0: nothing to drop, or no block to copy a shared one into).
  int32_t slide(Sequence& seq, BlockManager& blocks, Model& model) const;
  // The eviction of a window is its slide.
  int32_t evict(Sequence& seq, BlockManager& blocks, Model& model) override {
    return slide(seq, blocks, model);
  }

 private:
  int32_t window_;
  int32_t sink_blocks_;
  int32_t block_size_;
  int32_t heavy_blocks_;
};

}  // namespace tokamak
