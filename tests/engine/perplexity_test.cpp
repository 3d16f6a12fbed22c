// engine/perplexity: the sliding windows (which tokens each scores) and the perplexity
// through the paged forward, checked against the single-sequence forward over the same
// windows with the log-softmax summed here.

#include "engine/perplexity.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine_test_util.h"
#include "model/model.h"

namespace tokamak {
namespace {

using test::load_synthetic;
using test::random_prompt;
using test::small_spec;

std::string describe(const std::vector<PerplexityWindow>& ws) {
  std::string s;
  for (const auto& w : ws) {
    s += fmt::format("[{},{}) scores [{},{})  ", w.begin, w.end, w.score_begin, w.score_end);
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Windows.

TEST(PerplexityWindows, HuggingFaceExample) {
  // The header's picture: 10 tokens, ctx 6, stride 3.
  const std::vector<PerplexityWindow> want = {{0, 6, 1, 6}, {3, 9, 6, 9}, {6, 10, 9, 10}};
  const auto got = perplexity_windows(10, 6, 3);
  EXPECT_TRUE(got == want) << describe(got);
}

TEST(PerplexityWindows, StrideEqualToCtxScoresTheNextWindowsFirstToken) {
  // Disjoint windows: each one's last row scores the token the next one starts with.
  const std::vector<PerplexityWindow> want = {{0, 4, 1, 5}, {4, 8, 5, 9}, {8, 10, 9, 10}};
  const auto got = perplexity_windows(10, 4, 4);
  EXPECT_TRUE(got == want) << describe(got);
  // When the last row of a window scores the last token, no window follows that would score
  // nothing.
  const std::vector<PerplexityWindow> want9 = {{0, 4, 1, 5}, {4, 8, 5, 9}};
  const auto got9 = perplexity_windows(9, 4, 4);
  EXPECT_TRUE(got9 == want9) << describe(got9);
}

TEST(PerplexityWindows, TextShorterThanCtxIsOneWindow) {
  const std::vector<PerplexityWindow> want = {{0, 5, 1, 5}};
  const auto got = perplexity_windows(5, 512, 256);
  EXPECT_TRUE(got == want) << describe(got);
  const std::vector<PerplexityWindow> two = {{0, 2, 1, 2}};
  EXPECT_TRUE(perplexity_windows(2, 2, 2) == two) << describe(perplexity_windows(2, 2, 2));
}

// Hugging Face's loop ("Perplexity of fixed-length models"), written as they write it: labels
// of the window's last trg_len tokens, of which the first is dropped by the shift when it is
// the window's first token.
std::vector<PerplexityWindow> hugging_face_windows(int64_t n, int32_t ctx, int32_t stride) {
  std::vector<PerplexityWindow> ws;
  int64_t prev_end = 0;
  for (int64_t begin = 0; begin < n; begin += stride) {
    const int64_t end = std::min<int64_t>(begin + ctx, n);
    const int64_t trg_len = end - prev_end;
    ws.push_back({begin, end, std::max(end - trg_len, begin + 1), end});
    prev_end = end;
    if (end == n) break;
  }
  return ws;
}

TEST(PerplexityWindows, EveryTokenAfterTheFirstIsScoredExactlyOnce) {
  for (int64_t n : {2, 3, 7, 16, 17, 100, 511, 512, 513, 1000}) {
    for (int32_t ctx : {2, 3, 8, 16, 512}) {
      for (int32_t stride : {1, ctx / 2, ctx - 1, ctx}) {
        if (stride < 1) continue;
        SCOPED_TRACE("n " + std::to_string(n) + " ctx " + std::to_string(ctx) + " stride " +
                     std::to_string(stride));
        const auto ws = perplexity_windows(n, ctx, stride);
        ASSERT_FALSE(ws.empty());
        std::vector<int> times_scored(static_cast<size_t>(n), 0);
        for (size_t i = 0; i < ws.size(); ++i) {
          const PerplexityWindow& w = ws[i];
          EXPECT_EQ(w.begin, static_cast<int64_t>(i) * stride);
          EXPECT_EQ(w.end, std::min<int64_t>(w.begin + ctx, n));
          // Something to predict from, something scored, and only rows of the window used.
          EXPECT_GT(w.score_begin, w.begin);
          EXPECT_LT(w.score_begin, w.score_end);
          EXPECT_LE(w.score_end, std::min<int64_t>(w.end + 1, n));
          if (w.score_end == w.end + 1) {
            EXPECT_EQ(stride, ctx);
          }
          // Past the first window, every scored token sees at least ctx - stride tokens.
          if (i > 0) {
            EXPECT_GE(w.score_begin - w.begin, ctx - stride);
          }
          for (int64_t t = w.score_begin; t < w.score_end; ++t) ++times_scored[size_t(t)];
        }
        EXPECT_EQ(ws.back().score_end, n);
        EXPECT_EQ(times_scored[0], 0);
        for (int64_t t = 1; t < n; ++t) ASSERT_EQ(times_scored[size_t(t)], 1) << "token " << t;
        if (stride < ctx) {
          const auto hf = hugging_face_windows(n, ctx, stride);
          EXPECT_TRUE(ws == hf) << describe(ws) << "\nvs " << describe(hf);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Perplexity on a tiny model.

// The reference: every window through the single-sequence forward (contiguous cache, a fresh
// one per window) in calls of at most max_batch_tokens rows, logits of every row, and
// -log softmax of each scored token summed in double here. Returns the NLL sum.
double dense_nll_sum(Model& model, const std::vector<int32_t>& tokens, int32_t ctx,
                     int32_t stride) {
  const auto n_vocab = static_cast<size_t>(model.hparams().n_vocab);
  const int32_t chunk_max = model.max_batch_tokens();
  double sum = 0;
  for (const PerplexityWindow& w :
       perplexity_windows(static_cast<int64_t>(tokens.size()), ctx, stride)) {
    const auto len = static_cast<int32_t>(w.end - w.begin);
    auto kv = model.new_kv_cache(len);
    std::vector<float> logits;  // (len, n_vocab)
    for (int32_t start = 0; start < len; start += chunk_max) {
      const int32_t n = std::min(chunk_max, len - start);
      const std::vector<int32_t> toks(tokens.begin() + w.begin + start,
                                      tokens.begin() + w.begin + start + n);
      std::vector<int32_t> pos(static_cast<size_t>(n)), rows(static_cast<size_t>(n));
      std::iota(pos.begin(), pos.end(), start);
      std::iota(rows.begin(), rows.end(), 0);
      std::vector<float> out(static_cast<size_t>(n) * n_vocab);
      model.forward(Batch{toks, pos, rows}, *kv, out);
      logits.insert(logits.end(), out.begin(), out.end());
    }
    for (int64_t t = w.score_begin; t < w.score_end; ++t) {
      const float* row = logits.data() + static_cast<size_t>(t - w.begin - 1) * n_vocab;
      double max = row[0];
      for (size_t v = 0; v < n_vocab; ++v) max = std::max(max, double(row[v]));
      double z = 0;
      for (size_t v = 0; v < n_vocab; ++v) z += std::exp(double(row[v]) - max);
      sum += max + std::log(z) - double(row[size_t(tokens[size_t(t)])]);
    }
  }
  return sum;
}

struct ModelCase {
  int32_t n_tokens;
  int32_t ctx;
  int32_t stride;
};

TEST(Perplexity, PagedForwardMatchesTheSingleSequenceForward) {
  auto m = load_synthetic(small_spec(), /*threads=*/2);
  Model& model = *m->model;
  const auto tokens = random_prompt(11, 150, model.hparams().n_vocab);
  for (const ModelCase c : {ModelCase{150, 48, 24}, ModelCase{150, 48, 48}, ModelCase{150, 64, 5},
                            ModelCase{40, 64, 32}, ModelCase{2, 8, 4}}) {
    SCOPED_TRACE("n " + std::to_string(c.n_tokens) + " ctx " + std::to_string(c.ctx) + " stride " +
                 std::to_string(c.stride));
    const std::vector<int32_t> text(tokens.begin(), tokens.begin() + c.n_tokens);
    const PerplexityResult r = compute_perplexity(model, text, {.ctx = c.ctx, .stride = c.stride});
    const auto windows = perplexity_windows(c.n_tokens, c.ctx, c.stride);
    EXPECT_EQ(r.n_tokens, c.n_tokens);
    EXPECT_EQ(r.n_scored, c.n_tokens - 1);
    EXPECT_EQ(r.n_windows, static_cast<int64_t>(windows.size()));
    int64_t evaluated = 0;
    for (const auto& w : windows) evaluated += w.end - w.begin;
    EXPECT_EQ(r.n_evaluated, evaluated);

    const double dense_mean = dense_nll_sum(model, text, c.ctx, c.stride) / (c.n_tokens - 1);
    ASSERT_TRUE(std::isfinite(r.mean_nll()));
    EXPECT_GT(r.mean_nll(), 0.0);
    // The two forwards differ only in attention's rounding (F16 q and softmax weights in the
    // single forward, F32 in the paged one); measured differences in mean NLL are 2-6e-5
    // nats (mean NLL ~6.7) here, and 0 where every scored token sees one token.
    EXPECT_NEAR(r.mean_nll(), dense_mean, 2e-4);
    EXPECT_NEAR(r.perplexity(), std::exp(dense_mean), 2e-4 * std::exp(dense_mean));
  }
}

TEST(Perplexity, WindowsLargerThanOneForwardCallRunInChunks) {
  // max_batch_tokens 8, windows of 40: five calls per window. The paged forward is batch
  // invariant, so the result is bitwise that of one call per window.
  auto chunked = load_synthetic(small_spec(), /*threads=*/2, /*max_batch_tokens=*/8);
  auto whole = load_synthetic(small_spec(), /*threads=*/2, /*max_batch_tokens=*/64);
  ASSERT_EQ(chunked->model->max_batch_tokens(), 8);
  const auto tokens = random_prompt(12, 100, chunked->model->hparams().n_vocab);
  for (int32_t stride : {20, 40, 7}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const PerplexityOptions opts{.ctx = 40, .stride = stride};
    const PerplexityResult a = compute_perplexity(*chunked->model, tokens, opts);
    const PerplexityResult b = compute_perplexity(*whole->model, tokens, opts);
    EXPECT_EQ(a.n_scored, 99);
    EXPECT_EQ(a.nll_sum, b.nll_sum);
    const double dense = dense_nll_sum(*chunked->model, tokens, 40, stride) / 99;
    EXPECT_NEAR(a.mean_nll(), dense, 2e-4);
  }
}

// A hot window (kv/paged_kv_cache.h) covering every window keeps every token a query reads
// in F16: any quantized dtype then scores exactly as the F16 cache does. Narrower ones read
// older blocks encoded (q4 keys per channel), in between the F16 and the plain dtype; q4
// with its one-block window and chunked windows gives the same bits as one call per window.
TEST(Perplexity, HotWindowKeepsTheNewestTokensExact) {
  auto chunked = load_synthetic(small_spec(), /*threads=*/2, /*max_batch_tokens=*/8);
  auto m = load_synthetic(small_spec(), /*threads=*/2);
  const auto tokens = random_prompt(14, 120, m->model->hparams().n_vocab);
  const PerplexityOptions f16{.ctx = 48, .stride = 24};
  const double exact = compute_perplexity(*m->model, tokens, f16).nll_sum;
  for (KVDTypes dtype : {KVDTypes(KVDType::Int8), KVDTypes(KVDType::Q4),
                         KVDTypes(KVDType::Int8, KVDType::Q4)}) {
    SCOPED_TRACE(kv_dtypes_name(dtype));
    PerplexityOptions o = f16;
    o.kv_dtype = dtype;
    o.kv_hot_window = 48;
    EXPECT_EQ(compute_perplexity(*m->model, tokens, o).nll_sum, exact);
    o.kv_hot_window = 16;
    const double narrow = compute_perplexity(*m->model, tokens, o).nll_sum;
    EXPECT_NE(narrow, exact) << "nothing was read encoded";
    EXPECT_EQ(compute_perplexity(*chunked->model, tokens, o).nll_sum, narrow);
  }
}

TEST(Perplexity, ProgressAfterEveryWindow) {
  auto m = load_synthetic(small_spec(), /*threads=*/2);
  const auto tokens = random_prompt(13, 60, m->model->hparams().n_vocab);
  std::vector<int64_t> done;
  const PerplexityResult r = compute_perplexity(
      *m->model, tokens, {.ctx = 16}, [&](int64_t windows_done, const PerplexityResult& so_far) {
        done.push_back(windows_done);
        EXPECT_EQ(so_far.n_windows, 7);  // stride 8: windows at 0, 8, ..., 48
        EXPECT_GT(so_far.n_scored, 0);
      });
  EXPECT_EQ(r.n_windows, 7);
  EXPECT_EQ(done, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(Perplexity, RejectsWhatItCannotScore) {
  auto m = load_synthetic(small_spec(), /*threads=*/1);  // context_length 256
  Model& model = *m->model;
  const auto tokens = random_prompt(14, 20, model.hparams().n_vocab);
  const auto error_of = [&](const std::vector<int32_t>& toks, const PerplexityOptions& opts) {
    try {
      compute_perplexity(model, toks, opts);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(tokens, {.ctx = 1}).find("ctx must be at least 2"), std::string::npos);
  EXPECT_NE(error_of(tokens, {.ctx = 8, .stride = 9}).find("stride 9 is larger than ctx 8"),
            std::string::npos);
  EXPECT_NE(error_of(tokens, {.ctx = 8, .stride = -1}).find("stride must be positive"),
            std::string::npos);
  EXPECT_NE(error_of(tokens, {.ctx = 257}).find("training context of 256"), std::string::npos);
  EXPECT_NE(error_of({5}, {.ctx = 8}).find("at least 2 are needed"), std::string::npos);
  EXPECT_NE(error_of({5, 512}, {.ctx = 8}).find("token id 512 is outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(error_of(tokens, {.ctx = 8, .block_size = 0}).find("block_size"), std::string::npos);
}

}  // namespace
}  // namespace tokamak
