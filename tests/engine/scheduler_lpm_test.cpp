// Cache-aware admission (SchedulePolicy::Lpm) with no model behind it: a scheduler over a
// small pool with the prefix cache on, sequences built by hand. One sequence runs at a time
// (max_seqs 1), so the order of admission is the order the policy chose.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kv/paged_kv_cache.h"

namespace tokamak::scheduler_lpm_test {
namespace {

constexpr int32_t kBs = 4;

KVCacheShape shape() {
  KVCacheShape s;
  s.n_layer = 1;
  s.n_head_kv = 1;
  s.head_dim_k = 4;
  s.head_dim_v = 4;
  s.block_size = kBs;
  return s;
}

struct Fixture {
  explicit Fixture(const EngineOptions& o)
      : kv(shape(), 64), blocks(kv, o.prefix_caching), sched(o, blocks) {}

  Sequence* add(std::vector<int32_t> tokens, int32_t priority = 0) {
    auto s = std::make_unique<Sequence>();
    s->request_id = next_arrival;
    s->arrival = next_arrival++;
    s->priority = priority;
    s->n_prompt = static_cast<int32_t>(tokens.size());
    s->tokens = std::move(tokens);
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  // Runs the next admitted sequence's prompt to the end (caching its full blocks as the
  // engine does), finishes it and returns it; null when nothing was admitted.
  Sequence* run_next() {
    Sequence* seq = nullptr;
    for (int guard = 0; guard < 100; ++guard) {
      const StepPlan& plan = sched.schedule();
      if (plan.empty()) break;
      EXPECT_EQ(plan.seqs.size(), 1u);
      seq = plan.seqs[0].seq;
      seq->n_computed += plan.seqs[0].n_tokens;
      blocks.cache_full_blocks(*seq);
      if (seq->uncomputed() == 0) break;
    }
    if (seq != nullptr) sched.finish(seq);
    return seq;
  }

  PagedKVCache kv;
  BlockManager blocks;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
  uint64_t next_arrival = 0;
};

EngineOptions lpm(int32_t max_bypass) {
  EngineOptions o;
  o.max_batched_tokens = 256;
  o.max_seqs = 1;
  o.schedule_policy = SchedulePolicy::Lpm;
  o.lpm_max_bypass = max_bypass;
  return o;
}

std::vector<int32_t> tokens(int32_t first, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Caches the 3 blocks of `system` (12 tokens), then queues A (no prefix cached), B (1 block
// cached), C (3 blocks cached) in that order and returns the admission order.
std::vector<Sequence*> admission_order(Fixture& f, Sequence*& a, Sequence*& b, Sequence*& c) {
  const auto system = tokens(1, 12);
  f.add(concat(system, {50}));
  EXPECT_NE(f.run_next(), nullptr);
  const PrefixCache* cache = f.blocks.prefix_cache();
  EXPECT_NE(cache, nullptr) << "these tests need the prefix cache on";
  if (cache != nullptr) {
    EXPECT_EQ(cache->n_cached(), 3);
  }
  a = f.add(tokens(100, 13));
  b = f.add(concat(tokens(1, 4), tokens(200, 9)));
  c = f.add(concat(system, {300, 301}));
  std::vector<Sequence*> order;
  while (Sequence* s = f.run_next()) order.push_back(s);
  return order;
}

TEST(SchedulerLpmTest, FcfsAdmitsInArrivalOrder) {
  EngineOptions o = lpm(16);
  o.schedule_policy = SchedulePolicy::Fcfs;
  Fixture f(o);
  Sequence *a = nullptr, *b = nullptr, *c = nullptr;
  const auto order_f = admission_order(f, a, b, c);
  EXPECT_EQ(order_f, (std::vector<Sequence*>{a, b, c}));
}

TEST(SchedulerLpmTest, LongestCachedPrefixGoesFirst) {
  Fixture f(lpm(16));
  Sequence *a = nullptr, *b = nullptr, *c = nullptr;
  const auto order_f = admission_order(f, a, b, c);
  EXPECT_EQ(order_f, (std::vector<Sequence*>{c, b, a}));
  EXPECT_EQ(a->bypassed, 2);
  EXPECT_EQ(b->bypassed, 1);
  // C reused its 3 cached blocks, B one.
  const SchedulerStats& st = f.sched.stats();
  EXPECT_EQ(st.prefix_hits, 12 + 4);
}

TEST(SchedulerLpmTest, StarvationBoundPutsOftenBypassedRequestsFirst) {
  // Bypassed once is enough: after C overtook A and B, both are urgent and go in
  // arrival order.
  Fixture f(lpm(1));
  Sequence *a = nullptr, *b = nullptr, *c = nullptr;
  const auto order_f = admission_order(f, a, b, c);
  EXPECT_EQ(order_f, (std::vector<Sequence*>{c, a, b}));
  // A bound of 0 is FCFS.
  Fixture g(lpm(0));
  const auto order_g = admission_order(g, a, b, c);
  EXPECT_EQ(order_g, (std::vector<Sequence*>{a, b, c}));
}

TEST(SchedulerLpmTest, PriorityComesBeforeThePrefix) {
  Fixture f(lpm(16));
  const auto system = tokens(1, 12);
  f.add(concat(system, {50}));
  ASSERT_NE(f.run_next(), nullptr);
  Sequence* hit = f.add(concat(system, {60}));
  Sequence* urgent = f.add(tokens(400, 9), /*priority=*/-1);
  EXPECT_EQ(f.run_next(), urgent);
  EXPECT_EQ(f.run_next(), hit);
}

TEST(SchedulerLpmTest, WholePromptCachedRecomputesOnlyTheLastToken) {
  Fixture f(lpm(16));
  const auto prompt = tokens(1, 12);
  f.add(prompt);
  ASSERT_NE(f.run_next(), nullptr);
  Sequence* again = f.add(prompt);
  const StepPlan& plan = f.sched.schedule();
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].seq, again);
  EXPECT_EQ(plan.seqs[0].n_tokens, 1);
  EXPECT_TRUE(plan.seqs[0].sample);
  // Its last block was copied before the write: the cached one stays as it was.
  const PrefixCache& cache = *f.blocks.prefix_cache();
  EXPECT_FALSE(cache.cached(again->block_table[2]));
  EXPECT_TRUE(cache.cached(again->block_table[0]));
  EXPECT_EQ(f.sched.stats().prefix_queries, 12 + 12);
  EXPECT_EQ(f.sched.stats().prefix_hits, 11);
}

TEST(SchedulerLpmTest, EvictsCachedBlocksBeforePreempting) {
  // Fill the pool's 64 blocks with cached prompts, then admit a prompt that needs 40 blocks:
  // unlocked cached blocks give way, nothing is preempted.
  EngineOptions o = lpm(16);
  o.max_seqs = 4;
  Fixture f(o);
  for (int i = 0; i < 4; ++i) {
    f.add(tokens(1000 * (i + 1), 16 * kBs));
    ASSERT_NE(f.run_next(), nullptr);
  }
  ASSERT_EQ(f.blocks.prefix_cache()->n_cached(), 64);
  ASSERT_EQ(f.kv.pool().n_free(), 0);
  EXPECT_EQ(f.blocks.n_available(), 64);
  Sequence* big = f.add(tokens(9000, 40 * kBs));
  Sequence* ran = f.run_next();
  EXPECT_EQ(ran, big);
  EXPECT_EQ(f.sched.stats().preemptions, 0);
  EXPECT_EQ(f.blocks.prefix_cache()->n_cached(), 64) << "40 evicted, 40 cached";
  EXPECT_EQ(f.kv.pool().n_used(), 64);
  f.blocks.clear_prefix_cache();
  EXPECT_EQ(f.kv.pool().n_used(), 0);
}

}  // namespace
}  // namespace tokamak::scheduler_lpm_test
