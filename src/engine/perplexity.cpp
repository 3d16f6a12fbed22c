#include "engine/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "engine/block_manager.h"
#include "engine/kv_layout.h"
#include "engine/sequence.h"
#include "engine/step_rows.h"
#include "kv/paged_kv_cache.h"
#include "model/model.h"
#include "model/ragged_batch.h"

namespace tokamak {
namespace {

void check_inputs(const Model& model, std::span<const int32_t> tokens,
                  const PerplexityOptions& opts) {
  if (opts.ctx < 2) {
    throw Error(fmt::format("perplexity: ctx must be at least 2, got {}", opts.ctx));
  }
  if (opts.stride < 0) {
    throw Error(fmt::format("perplexity: stride must be positive, got {}", opts.stride));
  }
  const int32_t stride = opts.resolved_stride();
  if (stride > opts.ctx) {
    throw Error(fmt::format(
        "perplexity: stride {} is larger than ctx {}: tokens between windows would go unscored",
        stride, opts.ctx));
  }
  if (opts.block_size < 1) {
    throw Error(fmt::format("perplexity: block_size must be positive, got {}", opts.block_size));
  }
  const int32_t n_ctx_train = model.hparams().n_ctx_train;
  if (n_ctx_train > 0 && opts.ctx > n_ctx_train) {
    throw Error(fmt::format("perplexity: ctx {} is past the model's training context of {} tokens",
                            opts.ctx, n_ctx_train));
  }
  check_perplexity_tokens(model, tokens);
}

}  // namespace

double token_nll(std::span<const float> logits, int32_t target) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return std::log(sum) - (static_cast<double>(logits[static_cast<size_t>(target)]) - max);
}

void check_perplexity_tokens(const Model& model, std::span<const int32_t> tokens) {
  if (tokens.size() < 2) {
    throw Error(fmt::format(
        "perplexity: the text has {} token(s); at least 2 are needed to score one", tokens.size()));
  }
  const int32_t n_vocab = model.hparams().n_vocab;
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) {
      throw Error(
          fmt::format("perplexity: token id {} is outside the vocabulary [0, {})", t, n_vocab));
    }
  }
}

std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, int32_t ctx, int32_t stride) {
  assert(n_tokens >= 2 && ctx >= 2 && stride >= 1 && stride <= ctx);
  std::vector<PerplexityWindow> windows;
  int64_t scored_to = 1;  // tokens before it are scored (token 0 has nothing to predict it)
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + ctx, n_tokens);
    // The next window starts at `end` when stride == ctx and cannot score its first token;
    // this window's last row predicts it.
    const int64_t score_end = end < n_tokens && begin + stride == end ? end + 1 : end;
    windows.push_back({begin, end, scored_to, score_end});
    scored_to = score_end;
    // Done when the last token is scored (with stride == ctx, possibly by the last row of a
    // window that ends just before it: a window scoring nothing would then follow).
    if (scored_to == n_tokens) break;
  }
  return windows;
}

double PerplexityResult::mean_nll() const {
  return n_scored > 0 ? nll_sum / static_cast<double>(n_scored) : 0.0;
}

double PerplexityResult::perplexity() const {
  return std::exp(mean_nll());
}

double PerplexityResult::tokens_per_s() const {
  return seconds > 0 ? static_cast<double>(n_evaluated) / seconds : 0.0;
}

PerplexityResult compute_perplexity(Model& model, std::span<const int32_t> tokens,
                                    const PerplexityOptions& opts,
                                    const PerplexityProgress& progress) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  check_inputs(model, tokens, opts);
  const std::vector<PerplexityWindow> windows =
      perplexity_windows(n_tokens, opts.ctx, opts.resolved_stride());

  // One window's worth of blocks: every window is a sequence of its own from position 0, the
  // blocks of the last one freed first, as the engine reuses a freed block for a new one.
  const auto window_max = static_cast<int32_t>(std::min<int64_t>(opts.ctx, n_tokens));
  const int32_t bs = opts.block_size;
  const int32_t chunk_max = model.max_batch_tokens();
  const KVLayout layout = kv_layout(model, bs, opts.kv_dtype, opts.kv_hot_window, 1, chunk_max);
  PagedKVCache kv = layout.make((window_max + bs - 1) / bs);  // throws for what it cannot store
  BlockManager blocks(kv);

  // Buffers for one forward call of at most max_batch_tokens rows.
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  StepRows rows(chunk_max, 1);
  std::vector<int32_t> logit_rows;  // (<= chunk_max)
  logit_rows.reserve(static_cast<size_t>(chunk_max));
  std::vector<float> logits(static_cast<size_t>(chunk_max) * n_vocab);  // (rows, n_vocab)

  PerplexityResult result;
  result.n_tokens = n_tokens;
  result.n_windows = static_cast<int64_t>(windows.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t w = 0; w < windows.size(); ++w) {
    const PerplexityWindow& win = windows[w];
    const auto len = static_cast<int32_t>(win.end - win.begin);
    // Row j of the window (token begin + j) predicts token begin + j + 1: rows
    // [first_row, end_row) predict the scored tokens.
    const auto first_row = static_cast<int32_t>(win.score_begin - win.begin - 1);
    const auto end_row = static_cast<int32_t>(win.score_end - win.begin - 1);
    Sequence seq;
    seq.tokens.assign(tokens.begin() + win.begin, tokens.begin() + win.end);
    seq.n_prompt = len;
    for (int32_t start = 0; start < len; start += chunk_max) {
      const int32_t n = std::min(chunk_max, len - start);
      blocks.allocate(seq, n);
      rows.clear();
      rows.add(seq, n, kv, /*track_attention=*/false);
      logit_rows.clear();
      for (int32_t i = 0; i < n; ++i) {
        if (start + i >= first_row && start + i < end_row) logit_rows.push_back(i);
      }
      const std::span<float> out = std::span(logits).first(logit_rows.size() * n_vocab);
      model.forward(rows.batch(logit_rows), kv, out);
      for (size_t k = 0; k < logit_rows.size(); ++k) {
        const int64_t target = win.begin + start + logit_rows[k] + 1;
        result.nll_sum +=
            token_nll(out.subspan(k * n_vocab, n_vocab), tokens[static_cast<size_t>(target)]);
      }
      result.n_scored += static_cast<int64_t>(logit_rows.size());
      seq.n_computed += n;
    }
    blocks.free(seq);
    result.n_evaluated += len;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (progress) progress(static_cast<int64_t>(w + 1), result);
  }
  assert(result.n_scored == n_tokens - 1);
  return result;
}

}  // namespace tokamak
