// What EngineCore streams for each sample, driven step by step on a synthetic model: the
// finish reasons (max_tokens -> Length; EOS, a stop token or a stop string -> Stop, the stop
// string cut from the text), text deltas that add up to the detokenized tokens, timestamps
// in order, per-request sampling parameters honoured inside one batch, and cancellation of
// waiting, running and preempted requests (blocks free at once, exactly one final event).

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace tokamak {
namespace {

using test::Arrival;
using test::greedy;
using test::make_request;

class EngineOutputsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()); }
  static void TearDownTestSuite() { model_.reset(); }

  static Model& model() { return *model_->model; }
  static const Tokenizer& tok() { return *model_->tok; }
  static std::vector<int32_t> prompt(uint64_t seed, int32_t n) {
    return test::random_prompt(seed, n, tok().n_vocab());
  }
  static test::SampleResult alone(const Request& r) {
    EngineCore core(model(), tok(), test::roomy_options());
    return test::run_alone(core, r);
  }

  static std::unique_ptr<test::TestModel> model_;
};

std::unique_ptr<test::TestModel> EngineOutputsTest::model_;

// Checks the order of one finished sample's timestamps.
void expect_monotone(const SampleMetrics& m, size_t n_tokens) {
  EXPECT_LE(m.arrival, m.first_scheduled);
  EXPECT_NE(m.first_scheduled, Clock::time_point{});
  ASSERT_EQ(m.token_times.size(), n_tokens);
  ASSERT_EQ(size_t(m.output_tokens), n_tokens);
  if (n_tokens > 0) {
    EXPECT_LE(m.first_scheduled, m.first_token);
    EXPECT_EQ(m.first_token, m.token_times.front());
    EXPECT_TRUE(std::is_sorted(m.token_times.begin(), m.token_times.end()));
    EXPECT_LE(m.token_times.back(), m.finished);
  }
  EXPECT_LE(m.first_scheduled, m.finished);
}

TEST_F(EngineOutputsTest, TimestampsAreInOrderWithAndWithoutPreemption) {
  for (int32_t pool : {8192, 96}) {
    SCOPED_TRACE(pool);
    EngineOptions o = test::roomy_options();
    o.kv_budget = KVBudget::tokens(pool);
    o.max_batched_tokens = 16;
    EngineCore core(model(), tok(), o);
    const auto before = Clock::now();
    std::vector<Arrival> work = {
        {0, 1, make_request(prompt(1, 30), greedy(20), 2)},
        {0, 2, make_request(prompt(2, 9), greedy(24))},
        {3, 3, make_request(prompt(3, 40), greedy(12), 1, 1)},
    };
    auto r = test::drive(core, work);
    ASSERT_TRUE(r.completed);
    for (const auto& [key, s] : r.log.samples()) {
      SCOPED_TRACE(testing::Message() << "request " << key.first << " sample " << key.second);
      ASSERT_TRUE(s.metrics.has_value());
      EXPECT_LE(before, s.metrics->arrival);
      EXPECT_EQ(s.metrics->prompt_tokens, int32_t(work[key.first - 1].request.prompt.size()));
      expect_monotone(*s.metrics, s.tokens.size());
      ASSERT_TRUE(s.last_time.has_value());
      EXPECT_EQ(*s.last_time, s.metrics->finished) << "the final event's time is when it ended";
    }
    if (pool < 8192) {
      EXPECT_GT(core.stats().preemptions, 0);
    }
    test::expect_all_free(core);
  }
}

TEST_F(EngineOutputsTest, MaxTokensEndsWithLengthAndTextIsTheDetokenizedTokens) {
  EngineCore core(model(), tok(), test::roomy_options());
  std::vector<Arrival> work;
  for (uint64_t id = 1; id <= 6; ++id) {
    work.push_back({0, id, make_request(prompt(id, int32_t(5 * id)), greedy(int32_t(4 * id)))});
  }
  auto r = test::drive(core, work);
  ASSERT_TRUE(r.completed);
  for (const Arrival& a : work) {
    const auto& s = r.log.at(a.id, 0);
    EXPECT_EQ(s.finish, FinishReason::Length);
    EXPECT_EQ(s.tokens.size(), size_t(*a.request.params.max_tokens));
    EXPECT_EQ(s.text, test::detokenize(tok(), s.tokens)) << "request " << a.id;
    EXPECT_FALSE(s.text.empty());
  }
}

TEST_F(EngineOutputsTest, StopStringEndsWithStopAndIsCutFromTheText) {
  const Request base = make_request(prompt(7, 12), greedy(48));
  const auto full = alone(base);
  ASSERT_EQ(full.tokens.size(), 48u);
  // A short ASCII piece of the text's second half, as the stop string.
  const std::string& text = full.text;
  std::string stop;
  for (size_t i = text.size() / 2; i + 3 <= text.size() && stop.empty(); ++i) {
    if (std::all_of(text.begin() + i, text.begin() + i + 3,
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
      stop = text.substr(i, 3);
    }
  }
  ASSERT_FALSE(stop.empty()) << "no ASCII piece in: " << text;
  const size_t at = text.find(stop);

  Request r = base;
  r.params.stop = {stop, "\x01never"};
  r.n = 2;
  EngineCore core(model(), tok(), test::roomy_options());
  auto res = test::drive(core, {{0, 1, r}, {0, 2, make_request(prompt(8, 20), greedy(30))}});
  ASSERT_TRUE(res.completed);
  // Generation ends at the token that completes the stop string.
  size_t k = 0;
  while (test::detokenize(tok(), {full.tokens.begin(), full.tokens.begin() + k}).size() <
         at + stop.size()) {
    ++k;
  }
  for (int32_t i = 0; i < 2; ++i) {
    const auto& s = res.log.at(1, i);
    EXPECT_EQ(s.finish, FinishReason::Stop) << "sample " << i;
    EXPECT_EQ(s.text, text.substr(0, at)) << "sample " << i << ", stop \"" << stop << "\"";
    EXPECT_EQ(s.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + k));
  }
  EXPECT_EQ(res.log.at(2, 0).finish, FinishReason::Length);
  test::expect_all_free(core);
}

TEST_F(EngineOutputsTest, StopTokenEndsWithStopAndItsTextIsNotShown) {
  const Request base = make_request(prompt(9, 15), greedy(32));
  const auto full = alone(base);
  ASSERT_EQ(full.tokens.size(), 32u);
  const int32_t stop_token = full.tokens[6];
  const size_t first =
      size_t(std::find(full.tokens.begin(), full.tokens.end(), stop_token) - full.tokens.begin());
  Request r = base;
  r.params.stop_token_ids = {stop_token};
  const auto s = alone(r);
  EXPECT_EQ(s.finish, FinishReason::Stop);
  const std::vector<int32_t> before(full.tokens.begin(), full.tokens.begin() + first);
  std::vector<int32_t> with = before;
  with.push_back(stop_token);
  EXPECT_EQ(s.tokens, with) << "the stop token is the last token sampled";
  EXPECT_EQ(s.text, test::detokenize(tok(), before));
}

// A model whose EOS is a token the greedy run reaches: EOS ends with Stop unless ignore_eos.
TEST_F(EngineOutputsTest, EosEndsWithStopUnlessIgnored) {
  const Request base = make_request(prompt(10, 11), greedy(24, /*ignore_eos=*/true));
  const auto full = alone(base);
  ASSERT_EQ(full.tokens.size(), 24u);
  const int32_t eos = full.tokens[4];
  const size_t first =
      size_t(std::find(full.tokens.begin(), full.tokens.end(), eos) - full.tokens.begin());

  SyntheticModel sm = make_synthetic_model(test::small_spec());
  sm.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(uint32_t(eos)));
  auto m = test::load_model(sm);
  ASSERT_TRUE(m->tok->is_end_of_generation(eos));
  EngineCore core(*m->model, *m->tok, test::roomy_options());
  Request stops = base;
  stops.params.ignore_eos = false;
  stops.n = 2;
  auto r = test::drive(core, {{0, 1, stops}, {0, 2, base}});
  ASSERT_TRUE(r.completed);
  for (int32_t i = 0; i < 2; ++i) {
    const auto& s = r.log.at(1, i);
    EXPECT_EQ(s.finish, FinishReason::Stop);
    EXPECT_EQ(s.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + first + 1));
    EXPECT_EQ(s.text,
              test::detokenize(*m->tok, {full.tokens.begin(), full.tokens.begin() + first}));
  }
  EXPECT_EQ(r.log.at(2, 0).finish, FinishReason::Length);
  EXPECT_EQ(r.log.at(2, 0).tokens, full.tokens);
  test::expect_all_free(core);
}

// Requests with different temperatures, seeds, top-k / top-p and penalties in one batch each
// give what they give alone; sample i of a seeded request uses seed + i.
TEST_F(EngineOutputsTest, PerRequestSamplingParametersInOneBatch) {
  SamplingParams a = greedy(24);
  a.temperature = 0.8f;
  a.top_k = 20;
  a.seed = 7;
  SamplingParams b = greedy(20);
  b.temperature = 1.3f;
  b.top_p = 0.9f;
  b.min_p = 0.05f;
  b.seed = 99;
  SamplingParams c = greedy(16);
  c.repetition_penalty = 1.3f;
  c.presence_penalty = 0.5f;
  c.frequency_penalty = 0.2f;
  SamplingParams d = greedy(24);
  d.temperature = 1.0f;
  d.seed = 5;
  d.logprobs = 3;
  const std::vector<Arrival> work = {
      {0, 1, make_request(prompt(21, 17), a)},          {0, 2, make_request(prompt(22, 30), b)},
      {0, 3, make_request(prompt(23, 8), c)},           {0, 4, make_request(prompt(24, 25), d, 2)},
      {0, 5, make_request(prompt(25, 12), greedy(24))},
  };
  EngineOptions o = test::roomy_options();
  o.max_batched_tokens = 64;  // all prompts in one step, then one decode batch
  EngineCore core(model(), tok(), o);
  auto r = test::drive(core, work);
  ASSERT_TRUE(r.completed);
  for (const Arrival& w : work) {
    for (int32_t i = 0; i < w.request.n; ++i) {
      Request solo = w.request;
      if (solo.params.seed) solo.params.seed = *solo.params.seed + uint64_t(i);
      EXPECT_EQ(r.log.at(w.id, i).tokens, alone(solo).tokens)
          << "request " << w.id << " sample " << i;
    }
  }
  // The parameters were applied: sampling is not greedy, and the samples differ.
  Request greedy_a = work[0].request;
  greedy_a.params = greedy(24);
  EXPECT_NE(r.log.at(1, 0).tokens, alone(greedy_a).tokens);
  EXPECT_NE(r.log.at(4, 0).tokens, r.log.at(4, 1).tokens);
}

// --- cancellation -------------------------------------------------------------------------
// "Frees" below means no sequence holds the blocks (kv_blocks_used); full blocks stay in the
// prefix cache, unused, until the pool needs them.

TEST_F(EngineOutputsTest, CancelWaitingAndRunningRequestsFreesTheirBlocksAtOnce) {
  EngineOptions o = test::roomy_options();
  o.max_seqs = 3;
  EngineCore core(model(), tok(), o);
  test::Driver d(core);
  d.add(1, make_request(prompt(31, 20), greedy(100)));
  d.add(2, make_request(prompt(32, 20), greedy(100), 2));
  d.step();                                             // request 2 forks its second sample
  d.add(3, make_request(prompt(33, 20), greedy(100)));  // waits: max_seqs is 3
  for (int i = 0; i < 3; ++i) d.step();
  ASSERT_EQ(core.stats().running, 3);
  ASSERT_EQ(core.stats().waiting, 1);
  EXPECT_TRUE(d.log.at(3, 0).tokens.empty());

  const int32_t used = core.stats().kv_blocks_used;
  core.cancel(3);  // waiting: holds no blocks
  EXPECT_EQ(core.stats().kv_blocks_used, used);
  EXPECT_EQ(core.stats().waiting, 0);
  core.cancel(2);  // running, two samples sharing the prompt's first block
  EXPECT_EQ(core.stats().kv_blocks_used, 2) << "only request 1's 2 blocks are left";
  core.cancel(2);       // twice: ignored
  core.cancel(424242);  // unknown: ignored
  d.step();
  EXPECT_EQ(d.log.at(3, 0).finish, FinishReason::Cancelled);
  EXPECT_TRUE(d.log.at(3, 0).tokens.empty());
  for (int32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(d.log.at(2, i).finish, FinishReason::Cancelled);
    EXPECT_EQ(d.log.at(2, i).tokens.size(), 4u);
  }
  EXPECT_FALSE(d.log.at(1, 0).finish.has_value());
  core.cancel(1);
  EXPECT_EQ(core.stats().kv_blocks_used, 0);
  d.step();
  EXPECT_EQ(d.log.at(1, 0).finish, FinishReason::Cancelled);
  EXPECT_EQ(d.log.at(1, 0).tokens.size(), 5u);
  core.cancel(1);  // finished: ignored
  EXPECT_FALSE(d.step()) << "nothing left to do";
  EXPECT_TRUE(d.log.unfinished().empty());
  test::expect_all_free(core);
}

// A request of n samples cancelled while its prompt is still being prefilled (its other
// samples not forked yet) still ends every sample, once.
TEST_F(EngineOutputsTest, CancelDuringChunkedPrefillEndsEverySample) {
  EngineOptions o = test::roomy_options();
  o.max_batched_tokens = 8;
  EngineCore core(model(), tok(), o);
  test::Driver d(core);
  d.add(1, make_request(prompt(41, 60), greedy(10), 3));
  d.step();
  d.step();
  EXPECT_GT(core.stats().kv_blocks_used, 0);
  core.cancel(1);
  EXPECT_EQ(core.stats().kv_blocks_used, 0);
  EXPECT_TRUE(d.finish());
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.log.at(1, i).finish, FinishReason::Cancelled) << "sample " << i;
    EXPECT_TRUE(d.log.at(1, i).tokens.empty());
  }
  test::expect_all_free(core);
}

// The lower-ranked of two long requests is preempted by the tiny pool; cancelling it while it
// is preempted (recomputed or swapped out) frees what it held, and the other request goes on
// to give its solo output.
TEST_F(EngineOutputsTest, CancelPreemptedRequestInBothModes) {
  const Request first = make_request(prompt(51, 40), greedy(60), 1, /*priority=*/0);
  const Request second = make_request(prompt(52, 40), greedy(60), 1, /*priority=*/1);
  const auto solo = alone(first);
  for (PreemptionMode mode : {PreemptionMode::Recompute, PreemptionMode::Swap}) {
    SCOPED_TRACE(preemption_mode_name(mode));
    EngineOptions o = test::roomy_options();
    o.block_size = 4;
    o.kv_budget = KVBudget::tokens(152);  // one sequence of 100 tokens, not two
    o.preemption = mode;
    EngineCore core(model(), tok(), o);
    test::Driver d(core);
    d.add(1, first);
    d.add(2, second);
    while (d.steps < 200 && core.stats().preemptions == 0) d.step();
    ASSERT_EQ(core.stats().preemptions, 1);
    EXPECT_EQ(core.stats().waiting, 1) << "the preempted request waits";
    EXPECT_FALSE(d.log.at(2, 0).tokens.empty()) << "it had started";
    EXPECT_FALSE(d.log.at(1, 0).finish.has_value());
    const int32_t a_tokens = 40 + int32_t(d.log.at(1, 0).tokens.size());
    core.cancel(2);
    EXPECT_LE(core.stats().kv_blocks_used, (a_tokens + 3) / 4)
        << "blocks beyond request 1's own are held";
    EXPECT_EQ(core.stats().waiting, 0);
    ASSERT_TRUE(d.finish());
    EXPECT_EQ(d.log.at(2, 0).finish, FinishReason::Cancelled);
    ASSERT_TRUE(d.log.at(2, 0).metrics.has_value());
    EXPECT_EQ(d.log.at(2, 0).metrics->preemptions, 1);
    EXPECT_EQ(d.log.at(1, 0).tokens, solo.tokens);
    EXPECT_EQ(d.log.at(1, 0).finish, FinishReason::Length);
    test::expect_all_free(core);
  }
}

// Swap space freed by a cancel is usable again. The swap space holds one victim: a request
// swapped out and back in computes its prompt once (prompt_tokens_computed grows by the two
// prompts only); had the space of a cancelled swapped-out request leaked, the next victim
// could not be swapped and would be recomputed.
TEST_F(EngineOutputsTest, SwapSpaceOfACancelledRequestIsFreed) {
  EngineOptions o = test::roomy_options();
  o.block_size = 4;
  o.kv_budget = KVBudget::tokens(152);
  o.preemption = PreemptionMode::Swap;
  o.swap_space_bytes = 26 * model().kv_shape(4).bytes_per_block();  // one victim's worth
  EngineCore core(model(), tok(), o);
  test::Driver d(core);
  uint64_t id = 1;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const bool cancel_victim = round == 1;
    const Request hi = make_request(prompt(60 + round, 40), greedy(60), 1, 0);
    const Request lo = make_request(prompt(70 + round, 40), greedy(60), 1, 1);
    const uint64_t hi_id = id++;
    const uint64_t lo_id = id++;
    const EngineStats before = core.stats();
    d.add(hi_id, hi);
    d.add(lo_id, lo);
    while (d.steps < 1000 && core.stats().preemptions == before.preemptions) d.step();
    ASSERT_EQ(core.stats().preemptions, before.preemptions + 1);
    if (cancel_victim) core.cancel(lo_id);
    ASSERT_TRUE(d.finish());
    EXPECT_EQ(d.log.at(hi_id, 0).tokens, alone(hi).tokens);
    if (cancel_victim) {
      EXPECT_EQ(d.log.at(lo_id, 0).finish, FinishReason::Cancelled);
    } else {
      EXPECT_EQ(d.log.at(lo_id, 0).tokens, alone(lo).tokens);
      EXPECT_EQ(core.stats().prompt_tokens_computed - before.prompt_tokens_computed, 80)
          << "the victim was recomputed rather than swapped back in";
    }
    test::expect_all_free(core);
  }
}

// Without chunked prefill a prompt must fit one step, but a sequence preempted by
// recomputation comes back as prompt + output, which may not: it must still resume (and must
// not block the queue behind it).
TEST_F(EngineOutputsTest, RecomputedSequenceLongerThanTheStepBudgetResumes) {
  EngineOptions o = test::roomy_options();
  o.chunked_prefill = false;
  o.max_batched_tokens = 16;
  o.block_size = 4;
  o.kv_budget = KVBudget::tokens(64);
  o.preemption = PreemptionMode::Recompute;
  EngineCore core(model(), tok(), o);
  const Request hi = make_request(prompt(81, 12), greedy(40), 1, 0);
  const Request lo = make_request(prompt(82, 12), greedy(40), 1, 1);
  const Request later = make_request(prompt(83, 5), greedy(4), 1, 2);
  auto r = test::drive(core, {{0, 1, hi}, {0, 2, lo}, {30, 3, later}}, /*max_steps=*/2000);
  EXPECT_GT(core.stats().preemptions, 0);
  ASSERT_TRUE(r.completed) << "stalled after " << r.steps << " steps with " << core.stats().waiting
                           << " waiting, " << core.stats().running << " running";
  EXPECT_EQ(r.log.at(1, 0).tokens, alone(hi).tokens);
  EXPECT_EQ(r.log.at(2, 0).tokens, alone(lo).tokens);
  EXPECT_EQ(r.log.at(3, 0).tokens, alone(later).tokens);
  test::expect_all_free(core);
}

}  // namespace
}  // namespace tokamak
