// The prefix cache in the engine: greedy outputs are the same, token for token, with the
// cache on as with it off, for prompts that share prefixes in every way that matters (a
// common "system prompt", prefixes of exact block multiples and one off, a prompt cached
// whole, n > 1 samples, a second chat turn that extends the first turn's prompt and output),
// over engine configurations with chunking, tiny pools (eviction and preemption) and both
// scheduling policies; and the hits are really there.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace tokamak::engine_prefix_cache_test {
namespace {

using test::Arrival;
using test::greedy;
using test::make_request;

struct Config {
  const char* name;
  int32_t block_size;
  int32_t max_batched_tokens;
  bool chunked;
  int32_t pool_tokens;  // 0: a roomy pool
  PreemptionMode mode;
  SchedulePolicy policy = SchedulePolicy::Fcfs;
};

constexpr auto kRecompute = PreemptionMode::Recompute;
constexpr auto kSwap = PreemptionMode::Swap;
constexpr auto kLpm = SchedulePolicy::Lpm;

// The longest sequence (the second chat turn) has about 120 tokens.
const Config kConfigs[] = {
    {"Chunk512_Block16", 16, 512, true, 0, kRecompute},
    {"Chunk7_Block16", 16, 7, true, 0, kRecompute},
    {"Chunk16_Block1", 1, 16, true, 0, kRecompute},
    {"Chunk64_Block32", 32, 64, true, 0, kRecompute},
    {"NoChunk128_Block16", 16, 128, false, 0, kRecompute},
    {"Lpm_Chunk16_Block16", 16, 16, true, 0, kRecompute, kLpm},
    {"TinyPoolRecompute_Chunk16_Block16", 16, 16, true, 192, kRecompute},
    {"TinyPoolRecompute_Chunk512_Block4", 4, 512, true, 160, kRecompute, kLpm},
    {"TinyPoolSwap_Chunk64_Block16", 16, 64, true, 192, kSwap},
    {"TinyPoolSwap_NoChunk512_Block32", 32, 512, false, 192, kSwap},
};

using test::Arrivals;

void PrintTo(const Config& c, std::ostream* os) {
  *os << c.name;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<int32_t> head(const std::vector<int32_t>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<long>(n)};
}

class PrefixCacheEngineTest : public ::testing::TestWithParam<std::tuple<Config, Arrivals>> {
 protected:
  static void SetUpTestSuite() {
    model_ = test::load_synthetic(test::small_spec());
    const int32_t vocab = model_->tok->n_vocab();
    const auto system = test::random_prompt(1, 64, vocab);
    const auto q = [&](uint64_t seed, int32_t n) { return test::random_prompt(seed, n, vocab); };
    struct Spec {
      int64_t step;
      std::vector<int32_t> prompt;
      int32_t max_tokens, n;
    };
    const Spec specs[] = {
        {0, cat(system, q(2, 10)), 20, 1},             // system prompt + a question
        {0, cat(system, q(3, 7)), 16, 1},              // the same, computed side by side
        {6, system, 12, 1},                            // the whole prompt cached (64 tokens)
        {6, head(system, 63), 12, 1},                  // one short of a block multiple
        {8, cat(system, q(4, 1)), 16, 3},              // one past it, n = 3
        {10, cat(head(system, 48), q(5, 20)), 16, 1},  // 48: a multiple of 16, not of 32
        {12, cat(system, q(2, 10)), 20, 1},            // the first prompt again
        {14, q(6, 30), 12, 2},                         // nothing in common
    };
    uint64_t id = 100;
    for (const Spec& s : specs) {
      work_.push_back({s.step, id++, make_request(s.prompt, greedy(s.max_tokens), s.n)});
    }
    // Solo runs without the cache; then the second turn of the first "chat": its prompt,
    // its output and more text.
    EngineCore solo(*model_->model, *model_->tok, test::no_cache_options());
    for (const Arrival& a : work_) solo_[a.id] = test::run_alone(solo, a.request, a.id);
    const Arrival& first = work_[0];
    const auto turn2 = cat(cat(first.request.prompt, solo_[first.id].tokens), q(7, 5));
    work_.push_back({30, id, make_request(turn2, greedy(16), 2)});
    solo_[id] = test::run_alone(solo, work_.back().request, id);
    test::expect_all_free(solo);
  }
  static void TearDownTestSuite() {
    work_.clear();
    solo_.clear();
    model_.reset();
  }

  static std::unique_ptr<test::TestModel> model_;
  static std::vector<Arrival> work_;
  static std::map<uint64_t, test::SampleResult> solo_;
};

std::unique_ptr<test::TestModel> PrefixCacheEngineTest::model_;
std::vector<Arrival> PrefixCacheEngineTest::work_;
std::map<uint64_t, test::SampleResult> PrefixCacheEngineTest::solo_;

TEST_P(PrefixCacheEngineTest, OutputsMatchTheCacheOffSoloRuns) {
  const auto& [c, arrivals] = GetParam();
  EngineOptions o;
  o.block_size = c.block_size;
  o.max_batched_tokens = c.max_batched_tokens;
  o.chunked_prefill = c.chunked;
  o.kv_budget = KVBudget::tokens(c.pool_tokens > 0 ? c.pool_tokens : 8192);
  o.preemption = c.mode;
  o.schedule_policy = c.policy;
  o.prefix_caching = true;
  EngineCore core(*model_->model, *model_->tok, o);
  std::vector<Arrival> work = work_;
  if (arrivals == Arrivals::AllAtOnce) {
    // All but the second turn, which needs the first turn's output to make sense.
    for (size_t i = 0; i + 1 < work.size(); ++i) work[i].step = 0;
  }
  test::DriveResult r = test::drive(core, work);
  ASSERT_TRUE(r.completed) << "not finished after " << r.steps << " steps";
  for (const Arrival& a : work) {
    for (int32_t i = 0; i < a.request.n; ++i) {
      const test::SampleResult& s = r.log.at(a.id, i);
      EXPECT_EQ(s.tokens, solo_.at(a.id).tokens)
          << "request " << a.id << " sample " << i << "\n   got: " << test::str(s.tokens)
          << "\n  solo: " << test::str(solo_.at(a.id).tokens);
      EXPECT_EQ(s.text, solo_.at(a.id).text);
    }
  }
  const EngineStats st = core.stats();
  // Staggered, most of the 64-token system prompt is reused by 6 or more requests. All at
  // once, a roomy engine computes the first prompts side by side (nothing cached yet), but
  // the second turn reuses at least the first turn's prompt blocks. A tiny pool may have
  // evicted them.
  if (c.pool_tokens == 0 && arrivals == Arrivals::Staggered) {
    EXPECT_GT(st.prefix_cache_hits, 4 * 48) << "queries " << st.prefix_cache_queries;
  } else if (c.pool_tokens == 0) {
    EXPECT_GE(st.prefix_cache_hits, 64) << "queries " << st.prefix_cache_queries;
  } else {
    EXPECT_GT(st.prefix_cache_hits, 0) << "queries " << st.prefix_cache_queries;
  }
  EXPECT_LE(st.prefix_cache_hits, st.prefix_cache_queries);
  test::expect_all_free(core);
}

INSTANTIATE_TEST_SUITE_P(Configs, PrefixCacheEngineTest,
                         ::testing::Combine(::testing::ValuesIn(kConfigs),
                                            ::testing::Values(Arrivals::Staggered,
                                                              Arrivals::AllAtOnce)),
                         [](const auto& info) { return test::config_and_arrivals_name(info); });

// Counts on one engine, request after request: what is reused and what is computed.
TEST(PrefixCacheEngineCounts, HitsAndComputedTokensAddUp) {
  auto m = test::load_synthetic(test::small_spec());
  const int32_t vocab = m->tok->n_vocab();
  EngineCore core(*m->model, *m->tok, test::roomy_options());
  const auto prompt = test::random_prompt(11, 48, vocab);  // 3 blocks of 16

  const auto first = test::run_alone(core, make_request(prompt, greedy(10)), 1);
  EXPECT_EQ(core.stats().prefix_cache_hits, 0);
  EXPECT_EQ(core.stats().prefix_cache_queries, 48);
  EXPECT_EQ(core.stats().prompt_tokens_computed, 48);

  // The same prompt: cached whole, only its last token is computed (for the logits).
  const auto again = test::run_alone(core, make_request(prompt, greedy(10)), 2);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(core.stats().prefix_cache_hits, 47);
  EXPECT_EQ(core.stats().prompt_tokens_computed, 48 + 1);

  // A second turn: the prompt, the output (10 tokens, 9 of them computed: 57 tokens,
  // 3 full blocks) and 20 more tokens.
  const auto turn2 = cat(cat(prompt, first.tokens), test::random_prompt(12, 20, vocab));
  test::run_alone(core, make_request(turn2, greedy(4)), 3);
  EXPECT_EQ(core.stats().prefix_cache_hits, 47 + 48);
  // The second turn's computed tokens (78 + 3 of its output) are cached as well: 5 full
  // blocks, none of them used by a sequence now.
  EXPECT_EQ(core.stats().kv_blocks_used, 0);
  EXPECT_GE(core.stats().kv_blocks_cached, 5);
  test::expect_all_free(core);
}

// What each request is told it was spared (SampleMetrics::cached_prompt_tokens, the server's
// usage.prompt_tokens_details.cached_tokens): the prompt tokens its admission took from the
// cache.
TEST(PrefixCacheEngineCounts, EachRequestReportsItsCachedPromptTokens) {
  auto m = test::load_synthetic(test::small_spec());
  const int32_t vocab = m->tok->n_vocab();
  EngineCore core(*m->model, *m->tok, test::roomy_options());
  EngineCore off(*m->model, *m->tok, test::no_cache_options());
  const auto prompt = test::random_prompt(31, 48, vocab);  // 3 full blocks of 16
  const auto cached = [](const test::SampleResult& r) {
    EXPECT_TRUE(r.metrics.has_value());
    return r.metrics ? r.metrics->cached_prompt_tokens : -1;
  };
  EXPECT_EQ(cached(test::run_alone(core, make_request(prompt, greedy(6)), 1)), 0);
  // Cached whole: the last token is computed again for its logits.
  EXPECT_EQ(cached(test::run_alone(core, make_request(prompt, greedy(6)), 2)), 47);
  // Two more tokens: the 3 full blocks come from the cache, the partial fourth does not.
  auto longer = prompt;
  longer.insert(longer.end(), {5, 6});
  EXPECT_EQ(cached(test::run_alone(core, make_request(longer, greedy(6)), 3)), 48);
  // A different first token: nothing matches.
  auto other = prompt;
  other[0] = (other[0] + 1) % vocab;
  EXPECT_EQ(cached(test::run_alone(core, make_request(other, greedy(6)), 4)), 0);
  // n = 3: the forked samples share the first sample's prompt blocks and report its count.
  test::DriveResult r = test::drive(core, {{0, 5, make_request(longer, greedy(6), 3)}});
  ASSERT_TRUE(r.completed);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(cached(r.log.at(5, i)), 48) << "sample " << i;
  // Without the cache nothing is ever reused.
  for (const uint64_t id : {uint64_t{6}, uint64_t{7}}) {
    EXPECT_EQ(cached(test::run_alone(off, make_request(prompt, greedy(6)), id)), 0);
  }
  test::expect_all_free(core);
  test::expect_all_free(off);
}

// A request preempted and recomputed reports what its first admission got, not what its
// resumption found of its own blocks in the cache.
TEST(PrefixCacheEngineCounts, PreemptedRequestKeepsItsFirstAdmissionCount) {
  auto m = test::load_synthetic(test::small_spec());
  const int32_t vocab = m->tok->n_vocab();
  EngineOptions o = test::roomy_options();
  o.kv_budget = KVBudget::tokens(6 * 16);  // two requests of 32 + 40 tokens cannot both fit
  o.preemption = PreemptionMode::Recompute;
  EngineCore core(*m->model, *m->tok, o);
  test::DriveResult r =
      test::drive(core, {{0, 1, make_request(test::random_prompt(41, 32, vocab), greedy(40))},
                         {0, 2, make_request(test::random_prompt(42, 32, vocab), greedy(40))}});
  ASSERT_TRUE(r.completed);
  const SampleMetrics& later = *r.log.at(2, 0).metrics;
  ASSERT_GT(later.preemptions, 0) << "the setting no longer preempts: the test checks nothing";
  EXPECT_GT(core.stats().prefix_cache_hits, 0) << "its resumption found nothing cached";
  EXPECT_EQ(later.cached_prompt_tokens, 0);
  EXPECT_EQ(r.log.at(1, 0).metrics->cached_prompt_tokens, 0);
  test::expect_all_free(core);
}

// A pool of 8 blocks: request after request, cached blocks are evicted (least recently
// used first) to make room, never preempting, and the outputs stay the same.
TEST(PrefixCacheEngineCounts, EvictsUnderATinyPool) {
  auto m = test::load_synthetic(test::small_spec());
  const int32_t vocab = m->tok->n_vocab();
  EngineOptions o = test::roomy_options();
  o.kv_budget = KVBudget::tokens(8 * 16);
  EngineCore core(*m->model, *m->tok, o);
  EngineCore reference(*m->model, *m->tok, test::no_cache_options());
  const auto a = test::random_prompt(21, 64, vocab);
  const auto b = test::random_prompt(22, 64, vocab);
  const auto ra = test::run_alone(core, make_request(a, greedy(8)), 1);
  EXPECT_EQ(core.stats().kv_blocks_cached, 4);
  // B needs 5 blocks, 4 are free: one of A's goes (a leaf, the end of A's prompt).
  const auto rb = test::run_alone(core, make_request(b, greedy(8)), 2);
  EXPECT_EQ(rb.tokens, test::run_alone(reference, make_request(b, greedy(8)), 2).tokens);
  EXPECT_EQ(core.stats().preemptions, 0);
  EXPECT_EQ(core.stats().kv_blocks_cached, 7);
  // A again: its first 3 blocks are still cached.
  const int64_t hits = core.stats().prefix_cache_hits;
  const auto ra2 = test::run_alone(core, make_request(a, greedy(8)), 3);
  EXPECT_EQ(ra2.tokens, ra.tokens);
  EXPECT_EQ(core.stats().prefix_cache_hits - hits, 48);
  EXPECT_EQ(core.stats().preemptions, 0);
  EXPECT_LE(core.kv_cache().pool().n_used(), 8);
  test::expect_all_free(core);
  test::expect_all_free(reference);
}

// The real model, once: a shared system prompt and three questions, cache on versus off.
TEST(DefaultModelPrefixCache, SharedSystemPromptOutputsMatchCacheOff) {
  auto m = test::load_default_model(2, 512);
  if (!m) GTEST_SKIP() << "default model missing: " << test::default_model_path();
  const std::string system =
      "You are a helpful assistant. Answer briefly and truthfully. If you do not know, say so. "
      "Always be polite, and never make up facts about people, places or dates. ";
  const char* questions[] = {"What is the capital of France?", "Name a large ocean.",
                             "What colour is the sky on a clear day?"};
  std::vector<Arrival> work;
  for (size_t i = 0; i < std::size(questions); ++i) {
    auto prompt = m->tok->encode(system + questions[i], /*add_special=*/true,
                                 /*parse_special=*/false);
    work.push_back({int64_t(2 * i), i, make_request(std::move(prompt), greedy(16, false))});
  }
  std::map<uint64_t, test::SampleResult> off;
  {
    EngineCore core(*m->model, *m->tok, test::no_cache_options());
    test::DriveResult r = test::drive(core, work);
    ASSERT_TRUE(r.completed);
    for (const Arrival& a : work) off[a.id] = r.log.at(a.id, 0);
  }
  EngineCore core(*m->model, *m->tok, test::roomy_options());
  test::DriveResult r = test::drive(core, work);
  ASSERT_TRUE(r.completed);
  for (const Arrival& a : work) {
    EXPECT_EQ(r.log.at(a.id, 0).tokens, off[a.id].tokens) << "request " << a.id;
    EXPECT_EQ(r.log.at(a.id, 0).text, off[a.id].text);
  }
  EXPECT_GE(core.stats().prefix_cache_hits, 2 * 16) << "the system prompt was not reused";
  test::expect_all_free(core);
}

}  // namespace
}  // namespace tokamak::engine_prefix_cache_test
