#include "engine/perplexity_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <vector>

#include "core/error.h"
#include "engine/block_manager.h"
#include "engine/kv_eviction.h"
#include "engine/kv_layout.h"
#include "engine/sequence.h"
#include "engine/step_rows.h"
#include "kv/paged_kv_cache.h"
#include "model/model.h"
#include "model/ragged_batch.h"

namespace tokamak {
namespace {

// Most tokens the stream's cache holds at once (its largest position + 1): the policy's
// bound, or the whole text without one. Throws Error when those positions would pass the
// model's training context.
int64_t checked_cache_tokens(const Model& model, int64_t n_tokens,
                             const StreamPerplexityOptions& opts, const KVEvictionPolicy* policy) {
  if (opts.block_size < 1) {
    throw Error(fmt::format("perplexity: block_size must be positive, got {}", opts.block_size));
  }
  const int32_t max_chunk = model.max_batch_tokens();
  if (opts.chunk < 1 || opts.chunk > max_chunk) {
    throw Error(
        fmt::format("perplexity: chunk must be in [1, {}] (the model's max_batch_tokens), "
                    "got {}",
                    max_chunk, opts.chunk));
  }
  const int32_t n_ctx_train = model.hparams().n_ctx_train;
  if (policy == nullptr) {
    if (n_ctx_train > 0 && n_tokens > n_ctx_train) {
      throw Error(fmt::format(
          "perplexity: a stream of {} tokens with a full cache passes the model's training "
          "context of {} tokens; score fewer tokens or bound the cache with a window",
          n_tokens, n_ctx_train));
    }
    return n_tokens;
  }
  const int64_t bound = policy->max_cache_tokens(opts.chunk);
  const int64_t cache = std::min(bound, n_tokens);
  if (n_ctx_train > 0 && cache > n_ctx_train) {
    throw Error(fmt::format(
        "perplexity: the eviction policy lets the cache hold {} tokens with chunks of {}: "
        "positions would pass the model's training context of {} tokens; lower the window "
        "or the chunk",
        bound, opts.chunk, n_ctx_train));
  }
  return cache;
}

}  // namespace

PerplexityResult compute_stream_perplexity(Model& model, std::span<const int32_t> tokens,
                                           const StreamPerplexityOptions& opts,
                                           KVEvictionPolicy* policy,
                                           const PerplexityProgress& progress) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  check_perplexity_tokens(model, tokens);
  const int64_t cache_tokens = checked_cache_tokens(model, n_tokens, opts, policy);

  // The pool holds the bound and no more: blocks cover positions [0, n_computed + chunk).
  const int32_t bs = opts.block_size;
  const int32_t chunk = opts.chunk;
  const KVLayout layout = kv_layout(model, bs, opts.kv_dtype, opts.kv_hot_window, 1, chunk);
  PagedKVCache kv = layout.make(static_cast<int32_t>((cache_tokens + bs - 1) / bs));
  BlockManager blocks(kv);  // no prefix cache: one sequence, nothing to share
  Sequence seq;
  seq.tokens.reserve(static_cast<size_t>(cache_tokens));

  // Buffers for one chunk.
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  StepRows rows(chunk, 1);
  std::vector<int32_t> logit_rows;  // (<= chunk)
  logit_rows.reserve(static_cast<size_t>(chunk));
  std::vector<float> logits(static_cast<size_t>(chunk) * n_vocab);  // (rows, n_vocab)

  PerplexityResult result;
  result.n_tokens = n_tokens;
  result.n_chunks = (n_tokens + chunk - 1) / chunk;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t begin = 0, done = 0; begin < n_tokens; begin += chunk) {
    // As the engine does before every step: the policy makes room for the chunk.
    if (policy) result.n_evicted += policy->evict(seq, blocks, model);
    const auto n = static_cast<int32_t>(std::min<int64_t>(chunk, n_tokens - begin));
    const auto text = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(n));
    seq.tokens.insert(seq.tokens.end(), text.begin(), text.end());
    seq.n_prompt = seq.num_tokens();  // all of it is "prompt": nothing is sampled
    if (!blocks.can_allocate(seq, n)) {
      throw Error(fmt::format(
          "perplexity: the eviction policy left {} tokens in the cache, past its bound of {} "
          "for a chunk of {}",
          seq.n_computed, cache_tokens, n));
    }
    blocks.allocate(seq, n);
    result.peak_cache_blocks =
        std::max(result.peak_cache_blocks, static_cast<int32_t>(seq.block_table.size()));

    // The chunk's rows at cache positions n_computed ..; row i scores token begin + i + 1
    // (every row but the text's last one).
    rows.clear();
    rows.add(seq, n, kv, policy != nullptr && policy->tracks_attention());
    logit_rows.clear();
    for (int32_t i = 0; i < n; ++i) {
      if (begin + i + 1 < n_tokens) logit_rows.push_back(i);
    }
    const std::span<float> out = std::span(logits).first(logit_rows.size() * n_vocab);
    model.forward(rows.batch(logit_rows), kv, out);
    for (size_t k = 0; k < logit_rows.size(); ++k) {
      const int64_t target = begin + logit_rows[k] + 1;
      result.nll_sum +=
          token_nll(out.subspan(k * n_vocab, n_vocab), tokens[static_cast<size_t>(target)]);
    }
    seq.n_computed += n;
    result.n_scored += static_cast<int64_t>(logit_rows.size());
    result.n_evaluated += n;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (progress) progress(++done, result);
  }
  blocks.free(seq);
  assert(result.n_scored == n_tokens - 1);
  return result;
}

}  // namespace tokamak
