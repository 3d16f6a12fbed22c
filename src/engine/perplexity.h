#pragma once
// Perplexity of a model on a token sequence, by sliding windows (the fixed-length-model
// method of Hugging Face's "Perplexity of fixed-length models"):
//
//   tokens   | t0 t1 t2 t3 t4 t5 t6 t7 t8 t9 |           ctx = 6, stride = 3
//   window 0 | t0 t1 t2 t3 t4 t5             |  scores t1..t5 (all but its first token)
//   window 1 |          t3 t4 t5 t6 t7 t8    |  scores t6..t8 (what window 0 did not reach)
//   window 2 |                   t6 t7 t8 t9 |  scores t9
//
// Each window is run from scratch (positions from 0, an empty cache), so every scored token
// sees at least ctx - stride tokens of context (fewer in the first window), and every token
// but the first is scored exactly once. Perplexity = exp(mean NLL over the
// scored tokens).
//
// One departure from Hugging Face's code: with stride == ctx (windows that do not overlap)
// the first token of every later window has nothing before it in its window, and their loop
// leaves it unscored. Here the previous window's last row, which predicts exactly that
// token, scores it: every token but the first is scored exactly once for every stride. For
// stride < ctx the windows and scores are Hugging Face's.
//
// The windows go through the serving engine's forward (RaggedBatch over a PagedKVCache), so
// the KV dtype chosen for the cache is the one being judged. The other mode, one stream
// through a cache that an eviction policy bounds (the sliding KV window), is in
// engine/perplexity_stream.h.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/kv_dtype.h"

namespace tokamak {

class Model;

// One window: tokens [begin, end) are run; tokens [score_begin, score_end) are scored, each
// from the logits of the row before it. begin < score_begin <= score_end <= end + 1 (end + 1
// only when stride == ctx: the last row scores the token the next window starts with).
struct PerplexityWindow {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t score_begin = 0;
  int64_t score_end = 0;

  bool operator==(const PerplexityWindow&) const = default;
};

// The windows over n_tokens tokens. Preconditions (asserted): n_tokens >= 2, ctx >= 2,
// 1 <= stride <= ctx. Every window scores at least one token; the last one scores token
// n_tokens - 1; a text shorter than ctx is one window.
std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, int32_t ctx, int32_t stride);

struct PerplexityOptions {
  int32_t ctx = 512;                 // tokens per window
  int32_t stride = 0;                // tokens between window starts; 0 = ctx / 2
  int32_t block_size = 16;           // tokens per KV block
  KVDTypes kv_dtype = KVDType::F16;  // of keys and values, as asked (engine/kv_layout.h)
  int32_t kv_hot_window = 0;         // tokens kept in F16 besides the dtype (--kv-hot-window)

  int32_t resolved_stride() const { return stride > 0 ? stride : (ctx / 2 > 0 ? ctx / 2 : 1); }
};

struct PerplexityResult {
  int64_t n_tokens = 0;     // tokens of the text used
  int64_t n_windows = 0;    // fixed windows; 0 in the streaming mode
  int64_t n_scored = 0;     // n_tokens - 1
  int64_t n_evaluated = 0;  // tokens run through the model, window overlaps counted again
  double nll_sum = 0;       // nats, over the scored tokens
  double seconds = 0;       // wall time of the forwards and the scoring (and evictions)
  // Streaming mode only (engine/perplexity_stream.h).
  int64_t n_chunks = 0;           // forwards of at most `chunk` tokens
  int64_t n_evicted = 0;          // tokens the eviction policy dropped from the cache
  int32_t peak_cache_blocks = 0;  // most KV blocks the stream's sequence held at once

  double mean_nll() const;
  double perplexity() const;
  double tokens_per_s() const;  // n_evaluated / seconds
};

// Called after every window (chunk, in the streaming mode) with the windows (chunks) done
// so far and the result until then.
using PerplexityProgress = std::function<void(int64_t windows_done, const PerplexityResult&)>;

// Runs every window of `tokens` through model.forward(RaggedBatch, PagedKVCache&), in calls
// of at most model.max_batch_tokens() tokens, and sums the NLL of the scored tokens
// (log-softmax in double, max-subtracted). Throws Error for options or tokens it cannot
// score (ctx < 2, stride outside [1, ctx], block_size < 1, ctx past the model's training
// context, fewer than 2 tokens, a token id outside the vocabulary) and whatever PagedKVCache
// throws for the KV dtype (e.g. one not implemented).
PerplexityResult compute_perplexity(Model& model, std::span<const int32_t> tokens,
                                    const PerplexityOptions& opts,
                                    const PerplexityProgress& progress = {});

// Shared by both modes. -log softmax(logits)[target], in double with the max subtracted so
// that no exp overflows whatever the logits' range; target in [0, logits.size()).
double token_nll(std::span<const float> logits, int32_t target);
// Throws Error unless there are at least 2 tokens, all inside the model's vocabulary (scored
// tokens index the logits; the forward checks only the tokens it runs).
void check_perplexity_tokens(const Model& model, std::span<const int32_t> tokens);

}  // namespace tokamak
