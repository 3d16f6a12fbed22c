#pragma once
// Perplexity of a model on a token sequence run as ONE stream through ONE sequence, whose KV
// cache an eviction policy keeps bounded (the sliding KV window of `--kv-window`), so that
// what the policy costs in quality is measured by the code that serves:
//
//   tokens  | t0 ... t15 | t16 ... t31 | t32 ... t47 | ...     chunks of `chunk` tokens
//   step k  | policy.evict (as the engine before a step) → allocate the chunk's blocks →
//           | one forward of the chunk at cache positions n_computed .. → score
//
// Row i of a chunk (token begin + i) scores token begin + i + 1 from its logits, so the last
// row of a chunk scores the first token of the next one: every token but the first is scored
// exactly once, with all the context the cache still holds. Evictions happen between chunks,
// exactly where the serving engine slides a sequence between steps (a prompt chunked by
// max_batched_tokens); with `chunk` = 1 it is the decode of a generation.
//
// The stream is a real Sequence with blocks from a real BlockManager (no prefix cache: it
// is alone), and eviction is the policy's (engine/kv_eviction.h: KVWindow, or another one):
// positions are those in the cache, dropped tokens leave Sequence::tokens, kept keys are
// re-rotated. Without a policy the stream is one long sequence with a full cache (the
// baseline), which the model's training context bounds.

#include <cstdint>
#include <span>

#include "core/kv_dtype.h"
#include "engine/perplexity.h"

namespace tokamak {

class KVEvictionPolicy;
class Model;

struct StreamPerplexityOptions {
  int32_t chunk = 16;                // tokens per forward (the step); 1 .. max_batch_tokens
  int32_t block_size = 16;           // tokens per KV block: the policy's own
  KVDTypes kv_dtype = KVDType::F16;  // of keys and values, as asked (engine/kv_layout.h)
  int32_t kv_hot_window = 0;         // tokens kept in F16 besides the dtype (--kv-hot-window)
};

// Runs `tokens` through model.forward(RaggedBatch, PagedKVCache&) in chunks, `policy`
// evicting before each (null: none), and sums the NLL of every token but the first. The
// pool holds exactly the blocks of policy->max_cache_tokens(chunk) tokens (of the whole text
// without a policy), so a policy that broke its own bound would fail here. The result has
// n_chunks, n_evicted and peak_cache_blocks set and n_windows 0; `progress` is called after
// every chunk with the chunks done. Throws Error for what it cannot score (fewer than 2
// tokens, an id outside the vocabulary, chunk outside [1, model.max_batch_tokens()],
// block_size < 1, a cache bound that lets positions pass the model's training context: a
// window too large for it, or a text too long for it without a policy) and whatever
// PagedKVCache throws for the KV dtype.
PerplexityResult compute_stream_perplexity(Model& model, std::span<const int32_t> tokens,
                                           const StreamPerplexityOptions& opts,
                                           KVEvictionPolicy* policy,
                                           const PerplexityProgress& progress = {});

}  // namespace tokamak
