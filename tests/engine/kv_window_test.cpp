// The sliding KV window (engine/kv_window.h): generations past the model's context with a
// bounded cache, outputs equal to a windowless engine until the first slide, batched equal
// to alone while prompts fit the window, shared blocks copied before their keys move, swap
// preemption exact, no leaks; and the option checks.

#include "engine/kv_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace tokamak {
namespace {

using test::Arrival;
using test::greedy;
using test::make_request;

// small_spec(): n_ctx 256, block 16. Sink 4 (one block), window 48, 32-token steps: a
// sequence's cache never holds more than 16 + 48 + 16 + 32 = 112 tokens.
EngineOptions window_options(int32_t pool_tokens = 2048) {
  EngineOptions o = test::no_cache_options();
  o.block_size = 16;
  o.max_batched_tokens = 32;
  o.kv_window = 48;
  o.kv_sink = 4;
  o.kv_budget = KVBudget::tokens(pool_tokens);
  return o;
}

class KVWindowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()); }
  static void TearDownTestSuite() { model_.reset(); }
  Model& model() { return *model_->model; }
  const Tokenizer& tok() { return *model_->tok; }
  std::vector<int32_t> prompt(uint64_t seed, int32_t n) {
    return test::random_prompt(seed, n, tok().n_vocab());
  }
  static std::unique_ptr<test::TestModel> model_;
};
std::unique_ptr<test::TestModel> KVWindowTest::model_;

TEST_F(KVWindowTest, GeneratesPastTheContextWithABoundedCache) {
  EngineCore core(model(), tok(), window_options());
  ASSERT_TRUE(core.sliding_window());
  const int32_t n_ctx = model().hparams().n_ctx_train;
  const int32_t want = n_ctx + 150;  // past the context
  const Request r = make_request(prompt(1, 20), greedy(want));
  test::Driver d(core);
  d.add(1, r);
  int32_t peak_blocks = 0;
  while (d.step()) peak_blocks = std::max(peak_blocks, core.kv_cache().pool().n_used());
  ASSERT_FALSE(d.broken);
  const test::SampleResult& s = d.log.at(1, 0);
  ASSERT_TRUE(s.finish.has_value());
  EXPECT_EQ(*s.finish, FinishReason::Length);
  EXPECT_EQ(int32_t(s.tokens.size()), want);
  EXPECT_LE(peak_blocks, 112 / 16) << "the cache grew past sink + window + block + step";
  test::expect_all_free(core);
}

// Until the first slide (the cache past sink + window + a block), the window changes
// nothing; after it the outputs go their own way, but the same way every time.
TEST_F(KVWindowTest, SameAsNoWindowUntilTheFirstSlideAndDeterministic) {
  const Request r = make_request(prompt(2, 20), greedy(200));
  EngineOptions plain = window_options();
  plain.kv_window = 0;
  EngineCore full(model(), tok(), plain);
  const auto reference = test::run_alone(full, r);
  EngineCore win(model(), tok(), window_options());
  const auto a = test::run_alone(win, r);
  const auto b = test::run_alone(win, r, 2);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.tokens.size(), 200u);
  // The first slide comes before computing token 16 + 48 + 16 = 80: outputs 0 .. 59 are
  // sampled from caches that never slid (the 60th needs token 79's K/V, computed at 80).
  const size_t same = 80 - 20;
  EXPECT_TRUE(std::equal(a.tokens.begin(), a.tokens.begin() + same, reference.tokens.begin()))
      << "\n window: " << test::str(a.tokens) << "\n   full: " << test::str(reference.tokens);
  EXPECT_NE(a.tokens, reference.tokens) << "the window never slid: the test proves nothing";
}

// Decode slides one token at a time whatever else runs: requests whose prompts fit in the
// window give the same tokens batched and alone; so do swapped ones, in a pool too small
// for all of them.
TEST_F(KVWindowTest, BatchedAndSwappedMatchAlone) {
  std::vector<Request> reqs;
  for (int32_t i = 0; i < 4; ++i) {
    reqs.push_back(make_request(prompt(10 + i, 10 + 9 * i), greedy(150 + 20 * i)));
  }
  EngineCore solo(model(), tok(), window_options());
  std::vector<test::SampleResult> alone;
  for (size_t i = 0; i < reqs.size(); ++i) alone.push_back(test::run_alone(solo, reqs[i], i));

  for (bool tiny : {false, true}) {
    EngineOptions o = window_options(tiny ? 224 : 2048);  // tiny: two sequences' windows
    o.preemption = PreemptionMode::Swap;
    EngineCore core(model(), tok(), o);
    std::vector<Arrival> work;
    for (size_t i = 0; i < reqs.size(); ++i) work.push_back({int64_t(i) * 3, i, reqs[i]});
    const test::DriveResult r = test::drive(core, work);
    ASSERT_TRUE(r.completed);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(r.log.at(i, 0).tokens, alone[i].tokens) << "request " << i << " tiny " << tiny;
    }
    if (tiny) {
      EXPECT_GT(core.stats().preemptions, 0) << "the tiny pool forced no preemption";
    }
    test::expect_all_free(core);
  }
}

// n > 1 samples share their prompt's blocks, and the prefix cache shares blocks across
// requests: a slide copies a shared block before re-rotating its keys, so the samples and
// later requests are unaffected, and nothing slid is ever cached.
TEST_F(KVWindowTest, SharedBlocksAreCopiedBeforeTheirKeysMove) {
  EngineOptions o = window_options();
  o.prefix_caching = true;
  EngineCore core(model(), tok(), o);
  // A 60-token prompt: its blocks past the sink are shared by the two samples, then slid.
  Request two = make_request(prompt(20, 60), greedy(120), 2);
  const test::DriveResult r = test::drive(core, {{0, 1, two}});
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.log.at(1, 0).tokens, r.log.at(1, 1).tokens) << "greedy samples differ";
  // The same prompt alone afterwards: its prefix comes from the cache, which must still hold
  // the keys as computed (not re-rotated by the slides above).
  EngineCore fresh(model(), tok(), window_options());
  const auto ref = test::run_alone(fresh, make_request(two.prompt, greedy(120)));
  const auto again = test::run_alone(core, make_request(two.prompt, greedy(120)), 7);
  EXPECT_EQ(r.log.at(1, 0).tokens, ref.tokens);
  EXPECT_EQ(again.tokens, ref.tokens);
  EXPECT_GT(core.stats().prefix_cache_hits, 0);
  test::expect_all_free(core);
}

// A prompt longer than the model's context is taken and slid through chunk by chunk.
TEST_F(KVWindowTest, PromptsLongerThanTheContext) {
  EngineCore core(model(), tok(), window_options());
  const int32_t n_ctx = model().hparams().n_ctx_train;
  const auto s = test::run_alone(core, make_request(prompt(30, n_ctx + 100), greedy(40)));
  EXPECT_EQ(s.tokens.size(), 40u);
  test::expect_all_free(core);

  EngineOptions plain = window_options();
  plain.kv_window = 0;
  EngineCore bounded(model(), tok(), plain);
  EXPECT_THROW(bounded.add_request(1, make_request(prompt(30, n_ctx + 100), greedy(40))),
               RejectedRequest);
}

TEST_F(KVWindowTest, RejectsWindowsThatCannotWork) {
  EngineOptions o = window_options();
  o.kv_window = 8;  // below the block size
  EXPECT_TRUE(validate(o).has_value());
  o = window_options();
  o.kv_window = 400;  // with sink, block and step past the 256-token context
  EXPECT_THROW(EngineCore(model(), tok(), o), Error);
  o = window_options(64);  // the pool cannot hold one window
  EXPECT_THROW(EngineCore(model(), tok(), o), Error);
}

}  // namespace
}  // namespace tokamak
