#pragma once
// KVEvictionPolicy: what keeps one sequence's KV cache bounded while the sequence grows
// without end. Between steps, before the blocks of the next step are allocated, evict()
// drops computed tokens from the sequence's cache, in whole blocks:
//
//   before   | b0 | b1 | b2 | b3 | b4 | b5 (being filled) |   tokens 0 .. n_computed
//   evict    | b0 | b2 | b4 | b5 |                             which blocks go: the policy's
//
// Every policy leaves the sequence as KVWindow does (engine/kv_window.h): the dropped blocks
// are back in the pool, the dropped tokens have left Sequence::tokens (a token's index there
// stays its position in the cache), n_computed and n_prompt count only what is left,
// n_evicted counts what went, and the keys kept after a gap are re-rotated to their new
// positions (Model::shift_kv_positions). Kept blocks that other sequences share are copied
// before their keys move (BlockManager::make_block_exclusive).
//
// KVWindow drops the oldest blocks after an attention sink (StreamingLLM), or, with heavy
// hitters, the blocks attention used least (H2O, engine/kv_heavy.h): such a policy asks
// every forward to add the attention each block received to Sequence::block_mass
// (tracks_attention). tokamak perplexity --kv-window runs a policy over a text to measure
// what it costs in quality (engine/perplexity_stream.h).

#include <cstdint>

namespace tokamak {

class BlockManager;
class Model;
struct Sequence;

class KVEvictionPolicy {
 public:
  virtual ~KVEvictionPolicy() = default;

  // Most tokens a sequence's cache holds while a step of at most `step_tokens` tokens is
  // computed, when evict() ran before the step: sizes the pool, and bounds the positions
  // the model sees (they must stay inside its training context).
  virtual int64_t max_cache_tokens(int32_t step_tokens) const = 0;

  // Drops what must go from seq's cache before its next step (see above). Returns the tokens
  // dropped: 0 when nothing needs to go, or when it cannot go now (no block to copy a
  // shared one into); a later call tries again.
  virtual int32_t evict(Sequence& seq, BlockManager& blocks, Model& model) = 0;

  // Whether evict() reads Sequence::block_mass, which every forward must then keep up to
  // date (SeqAttention::block_mass).
  virtual bool tracks_attention() const { return false; }
};

}  // namespace tokamak
