// engine/perplexity_stream: one stream through one sequence whose cache an eviction policy
// bounds. A window that never slides gives exactly one fixed window over the text; a small
// window keeps the cache bounded past the model's context, evicts before every chunk as the
// engine does, and scores every token but the first once; a plugged-in policy is called
// the same way; what it cannot score it rejects.

#include "engine/perplexity_stream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/block_manager.h"
#include "engine/kv_window.h"
#include "engine/sequence.h"
#include "engine_test_util.h"
#include "model/model.h"

namespace tokamak {
namespace {

using test::load_synthetic;
using test::random_prompt;
using test::small_spec;

class StreamPerplexityTest : public ::testing::Test {
 protected:
  // small_spec(): n_ctx 256, vocabulary 512; max_batch_tokens 512.
  static void SetUpTestSuite() { model_ = load_synthetic(small_spec(), /*threads=*/2); }
  static void TearDownTestSuite() { model_.reset(); }
  Model& model() { return *model_->model; }
  std::vector<int32_t> text(uint64_t seed, int32_t n) {
    return random_prompt(seed, n, model().hparams().n_vocab);
  }
  static std::unique_ptr<test::TestModel> model_;
};
std::unique_ptr<test::TestModel> StreamPerplexityTest::model_;

// A policy that records the sequence as it finds it before each chunk, then lets a window
// evict: what any plugged-in policy sees.
class RecordingPolicy final : public KVEvictionPolicy {
 public:
  struct Call {
    int32_t n_computed;         // before the eviction
    int32_t n_evicted;          // the sequence's count, before
    int32_t n_tokens;           // Sequence::tokens, before
    int32_t blocks;             // held, before
    int32_t dropped = 0;        // by this call
    int32_t kept_computed = 0;  // after
    double mass = 0;            // Σ Sequence::block_mass, before
  };
  explicit RecordingPolicy(KVWindow window) : window_(window) {}
  int64_t max_cache_tokens(int32_t step_tokens) const override {
    return window_.max_cache_tokens(step_tokens);
  }
  bool tracks_attention() const override { return window_.tracks_attention(); }
  int32_t evict(Sequence& seq, BlockManager& blocks, Model& model) override {
    Call c{.n_computed = seq.n_computed,
           .n_evicted = seq.n_evicted,
           .n_tokens = seq.num_tokens(),
           .blocks = static_cast<int32_t>(seq.block_table.size())};
    for (float m : seq.block_mass) c.mass += m;
    c.dropped = window_.evict(seq, blocks, model);
    c.kept_computed = seq.n_computed;
    calls.push_back(c);
    return c.dropped;
  }
  std::vector<Call> calls;

 private:
  KVWindow window_;
};

// No slide: the stream computes the same K/V at the same positions as one window from
// scratch, and the paged forward is batch invariant (a token's rows do not depend on how
// the text is cut into forwards), and both sum the NLL in token order: the sums are equal
// bit for bit, whatever the chunk, with a window or with none.
TEST_F(StreamPerplexityTest, WindowAsLargeAsTheTextIsOneFixedWindow) {
  const auto tokens = text(1, 150);
  const PerplexityResult fixed = compute_perplexity(model(), tokens, {.ctx = 150, .stride = 150});
  ASSERT_EQ(fixed.n_windows, 1);
  for (int32_t chunk : {1, 5, 16, 64}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    KVWindow window(/*window=*/160, /*sink=*/4, /*block_size=*/16);
    for (KVWindow* policy : {&window, static_cast<KVWindow*>(nullptr)}) {
      const PerplexityResult r =
          compute_stream_perplexity(model(), tokens, {.chunk = chunk}, policy);
      EXPECT_EQ(r.nll_sum, fixed.nll_sum) << (policy ? "window" : "full cache");
      EXPECT_EQ(r.n_scored, 149);
      EXPECT_EQ(r.n_evaluated, 150);
      EXPECT_EQ(r.n_chunks, (150 + chunk - 1) / chunk);
      EXPECT_EQ(r.n_windows, 0);
      EXPECT_EQ(r.n_evicted, 0);
      EXPECT_EQ(r.peak_cache_blocks, 10);  // ceil(150 / 16)
    }
  }
}

// Sink 4 (one block) + window 48: the text is longer than the model's context of 256, the
// cache never holds more than sink + window + a block + a chunk, the policy runs before
// every chunk, every token fed is in the cache or evicted once, and after each chunk
// exactly the tokens up to the next chunk's first are scored.
TEST_F(StreamPerplexityTest, SmallWindowBoundsTheCacheAndScoresEveryTokenOnce) {
  const int32_t n = 400;
  const auto tokens = text(2, n);
  for (int32_t chunk : {1, 16, 20}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    RecordingPolicy policy(KVWindow(48, 4, 16));
    const int64_t bound = policy.max_cache_tokens(chunk);  // 16 + 48 + 16 + chunk
    std::vector<PerplexityResult> after;
    const PerplexityResult r =
        compute_stream_perplexity(model(), tokens, {.chunk = chunk}, &policy,
                                  [&](int64_t done, const PerplexityResult& so_far) {
                                    EXPECT_EQ(done, static_cast<int64_t>(after.size()) + 1);
                                    after.push_back(so_far);
                                  });

    const int64_t n_chunks = (n + chunk - 1) / chunk;
    EXPECT_EQ(r.n_chunks, n_chunks);
    EXPECT_EQ(r.n_scored, n - 1);
    EXPECT_EQ(r.n_evaluated, n);
    ASSERT_TRUE(std::isfinite(r.mean_nll()));
    EXPECT_GT(r.n_evicted, 0);
    // The bound holds and is nearly reached (the pool has exactly its blocks).
    EXPECT_LE(r.peak_cache_blocks, (bound + 15) / 16);
    EXPECT_GE(r.peak_cache_blocks, (16 + 48 + chunk) / 16);

    ASSERT_EQ(static_cast<int64_t>(policy.calls.size()), n_chunks);
    ASSERT_EQ(static_cast<int64_t>(after.size()), n_chunks);
    int64_t evicted = 0;
    for (size_t k = 0; k < policy.calls.size(); ++k) {
      const RecordingPolicy::Call& c = policy.calls[k];
      const int64_t fed = static_cast<int64_t>(k) * chunk;
      // Before chunk k: the cache holds what was fed and not evicted, and nothing else.
      EXPECT_EQ(c.n_computed + c.n_evicted, fed) << "chunk " << k;
      EXPECT_EQ(c.n_tokens, c.n_computed) << "chunk " << k;
      EXPECT_EQ(c.blocks, (c.n_computed + 15) / 16) << "chunk " << k;
      EXPECT_EQ(c.n_evicted, evicted) << "chunk " << k;
      // After the eviction the sink and the window are left, with less than a block more.
      if (c.dropped > 0) {
        EXPECT_GE(c.kept_computed, 16 + 48);
        EXPECT_LT(c.kept_computed, 16 + 48 + 16);
      }
      EXPECT_LE(c.kept_computed + chunk, bound);
      evicted += c.dropped;
      // Chunk k's rows score tokens fed + 1 .. fed + chunk (its last row the next chunk's
      // first): after it, every token up to there has been scored, each once.
      EXPECT_EQ(after[k].n_scored, std::min<int64_t>(fed + chunk, n - 1)) << "chunk " << k;
      EXPECT_EQ(after[k].n_evaluated, std::min<int64_t>(fed + chunk, n)) << "chunk " << k;
    }
    EXPECT_EQ(evicted, r.n_evicted);

    // The same stream again: the same sum.
    KVWindow same(48, 4, 16);
    EXPECT_EQ(compute_stream_perplexity(model(), tokens, {.chunk = chunk}, &same).nll_sum,
              r.nll_sum);
  }
}

// Until the first eviction (before the chunk that would take the cache past sink + window +
// a block), the window's stream is the full cache's, bit for bit; afterwards it is not.
TEST_F(StreamPerplexityTest, SameAsTheFullCacheUntilTheFirstEviction) {
  const auto tokens = text(3, 256);
  const auto sums = [&](KVWindow* policy) {
    std::vector<double> s;
    compute_stream_perplexity(model(), tokens, {.chunk = 16}, policy,
                              [&](int64_t, const PerplexityResult& r) { s.push_back(r.nll_sum); });
    return s;
  };
  KVWindow window(48, 4, 16);
  const std::vector<double> slid = sums(&window);
  const std::vector<double> full = sums(nullptr);
  ASSERT_EQ(slid.size(), 16u);
  ASSERT_EQ(full.size(), 16u);
  // 80 tokens fed (5 chunks) before the first eviction: chunks 0 .. 4 are the same.
  for (size_t k = 0; k < 5; ++k) EXPECT_EQ(slid[k], full[k]) << "chunk " << k;
  EXPECT_NE(slid[5], full[5]) << "the window evicted nothing: the test proves nothing";

  // No sink: another stream again.
  KVWindow no_sink(48, 0, 16);
  const std::vector<double> sinkless = sums(&no_sink);
  EXPECT_NE(sinkless.back(), slid.back());
}

// Heavy hitters (engine/kv_heavy.h): the stream tracks attention for the policy, keeps the
// same cache bound and evictions, and scores differently from the plain window once blocks
// are chosen by attention; the same every time.
TEST_F(StreamPerplexityTest, HeavyHittersTrackAttentionWithinTheSameBound) {
  const auto tokens = text(5, 400);
  KVWindow plain(64, 4, 16);
  RecordingPolicy heavy(KVWindow(64, 4, 16, /*heavy=*/32));
  ASSERT_TRUE(heavy.tracks_attention());
  const PerplexityResult a = compute_stream_perplexity(model(), tokens, {}, &plain);
  const PerplexityResult b = compute_stream_perplexity(model(), tokens, {}, &heavy);
  EXPECT_EQ(b.n_scored, 399);
  EXPECT_EQ(b.n_evicted, a.n_evicted);
  EXPECT_EQ(b.peak_cache_blocks, a.peak_cache_blocks);
  EXPECT_NE(b.nll_sum, a.nll_sum) << "heavy hitters chose the oldest blocks every time";
  // Before the second chunk, the first one's 16 queries x heads x layers of weight, all of
  // it on the blocks then held.
  const HParams& hp = model().hparams();
  ASSERT_GE(heavy.calls.size(), 2u);
  EXPECT_NEAR(heavy.calls[1].mass, 16.0 * hp.n_head * hp.n_layer, 1e-2);
  KVWindow again(64, 4, 16, 32);
  EXPECT_EQ(compute_stream_perplexity(model(), tokens, {}, &again).nll_sum, b.nll_sum);
}

TEST_F(StreamPerplexityTest, QuantizedKeysAreShiftedToo) {
  const auto tokens = text(4, 300);
  KVWindow f16(48, 4, 16);
  const PerplexityResult a = compute_stream_perplexity(model(), tokens, {}, &f16);
  for (const char* name : {"int8", "q4"}) {
    SCOPED_TRACE(name);
    KVWindow window(48, 4, 16);
    const PerplexityResult b = compute_stream_perplexity(
        model(), tokens, {.kv_dtype = *kv_dtypes_from_name(name)}, &window);
    EXPECT_EQ(b.n_scored, 299);
    EXPECT_EQ(b.n_evicted, a.n_evicted);
    ASSERT_TRUE(std::isfinite(b.mean_nll()));
    // Rounding the cache moves the mean NLL (6.68 nats on this random-weight model) by
    // 2e-6 (int8) and 7.5e-3 (q4) as measured. This checks that quantized caches slide at
    // all; that the shifted keys are right, in every dtype, is tests/ops/shift_paged_k_test's.
    EXPECT_NEAR(b.mean_nll(), a.mean_nll(), 0.02);
  }
}

TEST_F(StreamPerplexityTest, RejectsWhatItCannotScore) {
  const auto tokens = text(5, 300);
  const auto error_of = [&](const std::vector<int32_t>& toks, const StreamPerplexityOptions& o,
                            KVWindow* policy) {
    try {
      compute_stream_perplexity(model(), toks, o, policy);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto has = [](const std::string& e, const std::string& part) {
    return e.find(part) != std::string::npos;
  };
  KVWindow w48(48, 4, 16);
  std::string e = error_of(tokens, {.chunk = 0}, &w48);
  EXPECT_TRUE(has(e, "chunk must be in [1, 512]")) << e;
  e = error_of(tokens, {.chunk = 513}, &w48);
  EXPECT_TRUE(has(e, "chunk must be in [1, 512]")) << e;
  e = error_of(tokens, {.block_size = 0}, &w48);
  EXPECT_TRUE(has(e, "block_size")) << e;
  // 16 + 240 + 16 + 16 = 288 cache positions > 256 ...
  KVWindow w240(240, 4, 16);
  e = error_of(tokens, {}, &w240);
  EXPECT_TRUE(has(e, "lets the cache hold 288 tokens")) << e;
  EXPECT_TRUE(has(e, "training context of 256")) << e;
  // ... unless the text never reaches them.
  EXPECT_EQ(error_of(std::vector<int32_t>(tokens.begin(), tokens.begin() + 200), {}, &w240), "");
  // A full cache: the whole text at its own positions.
  e = error_of(std::vector<int32_t>(tokens.begin(), tokens.begin() + 257), {}, nullptr);
  EXPECT_TRUE(has(e, "257 tokens with a full cache")) << e;
  EXPECT_EQ(error_of(std::vector<int32_t>(tokens.begin(), tokens.begin() + 256), {}, nullptr), "");
  e = error_of({5}, {}, &w48);
  EXPECT_TRUE(has(e, "at least 2 are needed")) << e;
  e = error_of({5, 512}, {}, &w48);
  EXPECT_TRUE(has(e, "token id 512 is outside the vocabulary")) << e;
}

}  // namespace
}  // namespace tokamak
