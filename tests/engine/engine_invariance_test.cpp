// Batch invariance of the serving engine (ARCHITECTURE.md, "Batch invariance"): a request's
// greedy output is the same, token for token, whether it runs alone or beside other requests,
// whatever the chunk size, the block size, chunked prefill on or off, preemption (recompute
// or swap) forced by a tiny KV pool, and for every one of its n samples, and whether its
// prefix came from the prefix cache or was computed (the solo oracle runs with the cache
// off). On a synthetic model over many engine configurations, and on the default model for
// a few. Every KV dtype too, against a solo run in the same dtype: a token's stored K/V
// depends on its own values only (core/kv_dtype.h), so nothing else may matter; except q4
// keys, stored per channel across a block's tokens (KVDType::Q4C), which depend on the block
// size as well, and a hot window decides which blocks a query reads encoded: their solo run
// has the same block size and hot window.

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/engine_core.h"
#include "engine/kv_layout.h"
#include "engine_test_util.h"

namespace tokamak {
namespace {

using test::Arrival;
using test::greedy;
using test::make_request;

struct Config {
  const char* name;
  int32_t block_size;
  int32_t max_batched_tokens;
  bool chunked;
  int32_t pool_tokens;  // 0: a roomy pool; otherwise KVBudget::tokens(pool_tokens)
  PreemptionMode mode;
  int32_t max_seqs = 64;
  int32_t swap_blocks = 0;  // > 0: swap space for only this many blocks
  bool prefix_cache = true;
  SchedulePolicy policy = SchedulePolicy::Fcfs;
  KVDTypes kv_dtype = KVDType::F16;  // the solo oracle uses the same dtypes
  int32_t hot_window = 0;            // kv_hot_window tokens; the solo oracle uses the same
  int32_t host_tier_blocks = 0;      // > 0: a host KV tier of this many blocks
};

// The workload's longest sequence has 136 tokens: a pool of 2 x 136 holds about two. With
// 7-token steps fewer sequences are resident at once, so the pool is just over one.
constexpr int32_t kTiny = 272;
constexpr int32_t kTinier = 150;
constexpr auto kRecompute = PreemptionMode::Recompute;
constexpr auto kSwap = PreemptionMode::Swap;
constexpr auto kFcfs = SchedulePolicy::Fcfs;

const Config kConfigs[] = {
    {"Chunk7_Block16", 16, 7, true, 0, kRecompute},
    {"Chunk16_Block1", 1, 16, true, 0, kRecompute},
    {"Chunk64_Block32", 32, 64, true, 0, kRecompute},
    {"Chunk512_Block16", 16, 512, true, 0, kRecompute},
    {"NoChunk128_Block16", 16, 128, false, 0, kRecompute},
    {"NoChunk512_Block1", 1, 512, false, 0, kRecompute},
    {"MaxSeqs3_Chunk16_Block16", 16, 16, true, 0, kRecompute, 3},
    {"TinyPoolRecompute_Chunk16_Block16", 16, 16, true, kTiny, kRecompute},
    {"TinyPoolRecompute_Chunk7_Block1", 1, 7, true, kTinier, kRecompute},
    {"TinyPoolRecompute_Chunk512_Block16", 16, 512, true, kTiny, kRecompute},
    {"TinyPoolRecompute_NoChunk128_Block32", 32, 128, false, kTiny, kRecompute},
    {"TinyPoolSwap_Chunk64_Block16", 16, 64, true, kTiny, kSwap},
    {"TinyPoolSwap_Chunk7_Block1", 1, 7, true, kTinier, kSwap},
    {"TinyPoolSwap_NoChunk512_Block32", 32, 512, false, kTiny, kSwap},
    {"TinyPoolSwapLimited_Chunk16_Block16", 16, 16, true, kTiny, kSwap, 64, 3},
    {"NoPrefixCache_Chunk16_Block16", 16, 16, true, 0, kRecompute, 64, 0, false},
    {"NoPrefixCache_TinyPoolSwap_Chunk64_Block16", 16, 64, true, kTiny, kSwap, 64, 0, false},
    {"Lpm_Chunk16_Block16", 16, 16, true, 0, kRecompute, 64, 0, true, SchedulePolicy::Lpm},
    {"Lpm_TinyPoolRecompute_Chunk7_Block1", 1, 7, true, kTinier, kRecompute, 64, 0, true,
     SchedulePolicy::Lpm},
    {"Bf16_Chunk7_Block1", 1, 7, true, 0, kRecompute, 64, 0, true, kFcfs, KVDType::BF16},
    {"Int8_Chunk7_Block16", 16, 7, true, 0, kRecompute, 64, 0, true, kFcfs, KVDType::Int8},
    {"Int8_NoChunk128_Block1", 1, 128, false, 0, kRecompute, 64, 0, true, kFcfs, KVDType::Int8},
    {"Int8_TinyPoolRecompute_Chunk16_Block16", 16, 16, true, kTiny, kRecompute, 64, 0, true, kFcfs,
     KVDType::Int8},
    {"Int8_TinyPoolSwap_Chunk64_Block32", 32, 64, true, kTiny, kSwap, 64, 0, true, kFcfs,
     KVDType::Int8},
    {"Fp8_Chunk7_Block4", 4, 7, true, 0, kRecompute, 64, 0, true, kFcfs, KVDType::Fp8},
    {"Fp8_TinyPoolRecompute_Chunk16_Block16", 16, 16, true, kTiny, kRecompute, 64, 0, true, kFcfs,
     KVDType::Fp8},
    {"Fp8_Lpm_Chunk512_Block16", 16, 512, true, 0, kRecompute, 64, 0, true, SchedulePolicy::Lpm,
     KVDType::Fp8},
    {"Q4_Chunk7_Block16", 16, 7, true, 0, kRecompute, 64, 0, true, kFcfs, KVDType::Q4},
    {"Q4_TinyPoolSwap_Chunk16_Block1", 1, 16, true, kTinier, kSwap, 64, 0, true, kFcfs,
     KVDType::Q4},
    {"Int8Q4_TinyPoolSwap_Chunk16_Block16", 16, 16, true, kTiny, kSwap, 64, 0, true, kFcfs,
     KVDTypes(KVDType::Int8, KVDType::Q4)},
    {"Q4_NoPrefixCache_TinyPoolRecompute_Chunk64_Block16", 16, 64, true, kTiny, kRecompute, 64, 0,
     false, kFcfs, KVDType::Q4},
    // Hot windows wider than a block (hot/cold; the prefix cache off, as they require).
    {"Int8Hot48_NoPrefixCache_TinyPoolSwap_Chunk7_Block16", 16, 7, true, kTinier, kSwap, 64, 0,
     false, kFcfs, KVDType::Int8, 48},
    {"Q4Hot64_NoPrefixCache_TinyPoolRecompute_Chunk64_Block16", 16, 64, true, kTiny, kRecompute,
     64, 0, false, kFcfs, KVDType::Q4, 64},
    {"Q4Hot8_NoPrefixCache_Chunk16_Block4", 4, 16, true, 0, kRecompute, 64, 0, false, kFcfs,
     KVDType::Q4, 8},
    // Swap through the tiers: full blocks stay cached and go down to host memory when the
    // pool needs them; a two-block tier drops some, and those sequences recompute.
    {"HostTier_TinyPoolSwap_Chunk16_Block16", 16, 16, true, kTiny, kSwap, 64, 0, true, kFcfs,
     KVDType::F16, 0, 64},
    {"SmallHostTier_TinyPoolSwap_Chunk7_Block4", 4, 7, true, kTinier, kSwap, 64, 0, true, kFcfs,
     KVDType::F16, 0, 2},
    {"Q4HostTier_TinyPoolSwap_NoChunk512_Block16", 16, 512, false, kTiny, kSwap, 64, 0, true,
     kFcfs, KVDType::Q4, 0, 64},
};

using test::Arrivals;

void PrintTo(const Config& c, std::ostream* os) {
  *os << c.name;
}

EngineOptions options_for(const Config& c, const Model& model) {
  EngineOptions o;
  o.block_size = c.block_size;
  o.max_batched_tokens = c.max_batched_tokens;
  o.chunked_prefill = c.chunked;
  o.kv_budget = KVBudget::tokens(c.pool_tokens > 0 ? c.pool_tokens : 8192);
  o.preemption = c.mode;
  o.max_seqs = c.max_seqs;
  o.prefix_caching = c.prefix_cache;
  o.schedule_policy = c.policy;
  o.kv_dtype = c.kv_dtype;
  o.kv_hot_window = c.hot_window;
  KVCacheShape shape = model.kv_shape(c.block_size);
  shape.dtype = stored_kv_dtypes(c.kv_dtype);
  if (c.swap_blocks > 0) o.swap_space_bytes = size_t(c.swap_blocks) * shape.bytes_per_block();
  o.kv_tiers.host_bytes = size_t(c.host_tier_blocks) * shape.bytes_per_block();
  return o;
}

// Eight requests: prompts of 1 to 120 tokens, 8 to 24 output tokens, n of 1 to 3, three
// priorities, EOS honoured by some; arriving over 16 steps (or all before the first).
std::vector<Arrival> workload(Arrivals arrivals, int32_t vocab) {
  struct Spec {
    int64_t step;
    int32_t prompt_len, max_tokens, n, priority;
    bool ignore_eos;
  };
  const Spec specs[] = {
      {0, 37, 20, 1, 0, true},  {0, 5, 24, 2, 0, false},   {1, 90, 12, 1, 1, true},
      {2, 1, 16, 1, 0, false},  {4, 64, 24, 3, 0, true},   {4, 16, 8, 1, -1, true},
      {9, 17, 20, 1, 0, false}, {15, 120, 16, 1, 0, true},
  };
  std::vector<Arrival> out;
  uint64_t id = 100;
  for (const Spec& s : specs) {
    Request r = make_request(test::random_prompt(id, s.prompt_len, vocab),
                             greedy(s.max_tokens, s.ignore_eos), s.n, s.priority);
    out.push_back({arrivals == Arrivals::Staggered ? s.step : 0, id, std::move(r)});
    ++id;
  }
  return out;
}

class EngineInvarianceTest : public ::testing::TestWithParam<std::tuple<Config, Arrivals>> {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()); }
  // Request `id` alone, in a roomy engine with the default chunking and no prefix cache, in
  // the config's KV dtypes, with its block size and hot window where they change what is
  // stored (q4 keys are encoded per block, and a hot window decides which blocks are read
  // encoded); computed once per such engine.
  static const test::SampleResult& solo(const Config& c, uint64_t id) {
    const int32_t hot = hot_window_blocks(c.block_size, c.kv_dtype, c.hot_window);
    const bool per_block = hot > 0;
    const std::string key =
        kv_dtypes_name(c.kv_dtype) +
        (per_block ? " block " + std::to_string(c.block_size) + " hot " + std::to_string(hot)
                   : std::string());
    if (!solo_.contains({key, id})) {
      EngineOptions o = test::no_cache_options();
      o.kv_dtype = c.kv_dtype;
      if (per_block) {
        o.block_size = c.block_size;
        o.kv_hot_window = c.hot_window;
      }
      EngineCore engine(*model_->model, *model_->tok, o);
      for (const Arrival& a : workload(Arrivals::Staggered, model_->tok->n_vocab())) {
        solo_[{key, a.id}] = test::run_alone(engine, a.request, a.id);
        test::expect_all_free(engine);
      }
    }
    return solo_.at({key, id});
  }
  static void TearDownTestSuite() {
    solo_.clear();
    model_.reset();
  }

  static std::unique_ptr<test::TestModel> model_;
  static std::map<std::pair<std::string, uint64_t>, test::SampleResult> solo_;
};

std::unique_ptr<test::TestModel> EngineInvarianceTest::model_;
std::map<std::pair<std::string, uint64_t>, test::SampleResult> EngineInvarianceTest::solo_;

TEST_P(EngineInvarianceTest, EverySampleMatchesItsSoloRun) {
  const auto& [config, arrivals] = GetParam();
  EngineCore core(*model_->model, *model_->tok, options_for(config, *model_->model));
  const auto work = workload(arrivals, model_->tok->n_vocab());
  test::DriveResult r = test::drive(core, work);
  ASSERT_TRUE(r.completed) << "not finished after " << r.steps << " steps";

  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t sample_preemptions = 0;
  for (const Arrival& a : work) {
    prompt_tokens += int64_t(a.request.prompt.size());
    const test::SampleResult& solo = EngineInvarianceTest::solo(config, a.id);
    ASSERT_TRUE(solo.finish.has_value());
    for (int32_t i = 0; i < a.request.n; ++i) {
      const test::SampleResult& s = r.log.at(a.id, i);
      EXPECT_EQ(s.tokens, solo.tokens)
          << "request " << a.id << " sample " << i << " (prompt of " << a.request.prompt.size()
          << ")\n   got: " << test::str(s.tokens) << "\n  solo: " << test::str(solo.tokens);
      ASSERT_TRUE(s.finish.has_value());
      EXPECT_EQ(*s.finish, *solo.finish) << "request " << a.id << " sample " << i;
      EXPECT_EQ(s.text, solo.text) << "request " << a.id << " sample " << i;
      ASSERT_TRUE(s.metrics.has_value());
      EXPECT_EQ(s.metrics->output_tokens, int32_t(s.tokens.size()));
      EXPECT_EQ(s.metrics->prompt_tokens, int32_t(a.request.prompt.size()));
      output_tokens += int64_t(s.tokens.size());
      sample_preemptions += s.metrics->preemptions;
    }
  }

  const EngineStats st = core.stats();
  EXPECT_EQ(st.output_tokens, output_tokens);
  EXPECT_EQ(st.preemptions, sample_preemptions)
      << "the engine's preemption count and its samples' do not agree";
  if (config.host_tier_blocks > 0 && config.mode == kSwap) {
    EXPECT_GT(st.swaps_in, 0) << "no sequence came back through the tiers";
    EXPECT_GT(st.kv_tiers.host_stores, 0);
    // A two-block tier cannot hold what the swapped sequences leave: some must recompute.
    if (config.host_tier_blocks <= 2) {
      EXPECT_GT(st.swap_lost_tokens, 0);
    }
  }
  if (config.pool_tokens > 0) {
    // Otherwise the test proves nothing about preemption.
    EXPECT_GT(st.preemptions, 0) << "the tiny pool forced no preemption; peak " << st.kv_blocks_peak
                                 << " of " << st.kv_blocks_total << " blocks in " << r.steps
                                 << " steps";
  } else {
    EXPECT_EQ(st.preemptions, 0);
    // Samples of one request share its prompt's blocks: each prompt is computed once, or
    // taken from the prefix cache.
    EXPECT_EQ(st.prompt_tokens_computed + st.prefix_cache_hits, prompt_tokens);
  }
  if (!config.prefix_cache) {
    EXPECT_EQ(st.prefix_cache_queries, 0);
  }
  EXPECT_GE(st.prompt_tokens_computed + st.prefix_cache_hits, prompt_tokens);
  EXPECT_LE(st.kv_blocks_peak, st.kv_blocks_total);
  test::expect_all_free(core);
}

INSTANTIATE_TEST_SUITE_P(Configs, EngineInvarianceTest,
                         ::testing::Combine(::testing::ValuesIn(kConfigs),
                                            ::testing::Values(Arrivals::Staggered,
                                                              Arrivals::AllAtOnce)),
                         [](const auto& info) { return test::config_and_arrivals_name(info); });

// The same request run twice alone in one engine, and in engines of other block sizes, gives
// the same tokens: the oracle above is itself stable.
TEST(EngineSoloTest, AloneTheOutputIsTheSameInAnyEngine) {
  auto m = test::load_synthetic(test::small_spec());
  const Request r = make_request(test::random_prompt(5, 40, m->tok->n_vocab()), greedy(24));
  EngineCore a(*m->model, *m->tok, test::roomy_options());
  const auto first = test::run_alone(a, r);
  const auto again = test::run_alone(a, r, 2);
  EXPECT_EQ(first.tokens, again.tokens);
  ASSERT_EQ(first.tokens.size(), 24u);
  for (int32_t bs : {1, 32}) {
    EngineOptions o = test::roomy_options();
    o.block_size = bs;
    o.max_batched_tokens = 7;
    EngineCore b(*m->model, *m->tok, o);
    EXPECT_EQ(test::run_alone(b, r).tokens, first.tokens) << "block size " << bs;
  }
  // A different prompt must give different tokens, or the comparisons above prove little.
  Request other = r;
  other.prompt[0] = other.prompt[0] == 3 ? 4 : 3;
  other.prompt.back() = other.prompt.back() == 3 ? 4 : 3;
  EXPECT_NE(test::run_alone(a, other, 3).tokens, first.tokens);
}

// The real model: a few prompts of 20 to 60 tokens, 16 to 24 output tokens each, alone versus
// batched (staggered and all at once, chunked and not) versus a pool just over the longest
// sequence, in both preemption modes.
TEST(DefaultModelEngineInvariance, BatchedAndPreemptedMatchAlone) {
  auto m = test::load_default_model(2, 512);
  if (!m) GTEST_SKIP() << "default model missing: " << test::default_model_path();
  const char* texts[] = {
      "The quick brown fox jumps over the lazy dog. Then the dog wakes up and",
      "Write a short poem about the sea, the wind and the old lighthouse keeper who watched "
      "the ships come and go for forty years without ever leaving the island.",
      "Q: What is the capital of France, and which river flows through it? A:",
      "Once upon a time, in a small village at the foot of a mountain, there lived a girl "
      "named Lily who loved to read books about faraway lands, dragons, knights and the stars "
      "that she could see from her window every night before she fell asleep.",
  };
  const int32_t max_tokens[] = {16, 24, 20, 24};
  std::vector<Request> reqs;
  int32_t longest = 0;
  for (size_t i = 0; i < std::size(texts); ++i) {
    auto prompt = m->tok->encode(texts[i], /*add_special=*/true, /*parse_special=*/false);
    ASSERT_GE(prompt.size(), 15u) << texts[i];
    ASSERT_LE(prompt.size(), 64u) << texts[i];
    longest = std::max(longest, int32_t(prompt.size()) + max_tokens[i]);
    reqs.push_back(make_request(std::move(prompt), greedy(max_tokens[i], /*ignore_eos=*/false),
                                i == 1 ? 2 : 1));
  }

  std::vector<test::SampleResult> solo;
  {
    EngineCore core(*m->model, *m->tok, test::roomy_options());
    for (size_t i = 0; i < reqs.size(); ++i) solo.push_back(test::run_alone(core, reqs[i], i));
    test::expect_all_free(core);
  }

  struct Case {
    const char* name;
    int32_t block_size, max_batched_tokens;
    bool chunked;
    int32_t pool_tokens;
    PreemptionMode mode;
    bool staggered;
  };
  const Case cases[] = {
      {"chunk16_all_at_once", 16, 16, true, 0, kRecompute, false},
      {"nochunk_staggered_block32", 32, 512, false, 0, kRecompute, true},
      {"tiny_pool_recompute", 16, 512, true, longest + 8, kRecompute, false},
      {"tiny_pool_swap_block1", 1, 32, true, longest + 8, kSwap, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EngineOptions o;
    o.block_size = c.block_size;
    o.max_batched_tokens = c.max_batched_tokens;
    o.chunked_prefill = c.chunked;
    o.kv_budget = KVBudget::tokens(c.pool_tokens > 0 ? c.pool_tokens : 4096);
    o.preemption = c.mode;
    EngineCore core(*m->model, *m->tok, o);
    std::vector<Arrival> work;
    for (size_t i = 0; i < reqs.size(); ++i) {
      work.push_back({c.staggered ? int64_t(3 * i) : 0, i, reqs[i]});
    }
    test::DriveResult r = test::drive(core, work);
    ASSERT_TRUE(r.completed);
    for (size_t i = 0; i < reqs.size(); ++i) {
      for (int32_t k = 0; k < reqs[i].n; ++k) {
        EXPECT_EQ(r.log.at(i, k).tokens, solo[i].tokens)
            << "request " << i << " sample " << k
            << "\n   got: " << test::str(r.log.at(i, k).tokens)
            << "\n  solo: " << test::str(solo[i].tokens);
        EXPECT_EQ(r.log.at(i, k).text, solo[i].text);
      }
    }
    if (c.pool_tokens > 0) {
      EXPECT_GT(core.stats().preemptions, 0)
          << "no preemption forced; peak " << core.stats().kv_blocks_peak << " of "
          << core.stats().kv_blocks_total << " blocks, longest " << longest;
    }
    test::expect_all_free(core);
  }
}

}  // namespace
}  // namespace tokamak
