// The Scheduler with no model behind it: a small PagedKVCache, a BlockManager, and Sequences
// built by hand. apply() plays the engine's part after each step (the computed tokens count,
// a sampled row appends a token), so step after step the plans can be checked: decodes
// first, the token budget, chunked prefill, max_seqs, admission only with free blocks,
// preemption of the lowest rank, resumption ahead of later arrivals, copy-on-write.

#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "kv/paged_kv_cache.h"

namespace tokamak::scheduler_test {
namespace {

KVCacheShape shape(int32_t block_size) {
  KVCacheShape s;
  s.n_layer = 1;
  s.n_head_kv = 1;
  s.head_dim_k = 4;
  s.head_dim_v = 4;
  s.block_size = block_size;
  return s;
}

EngineOptions options(int32_t budget, bool chunked = true, int32_t max_seqs = 64) {
  EngineOptions o;
  o.max_batched_tokens = budget;
  o.chunked_prefill = chunked;
  o.max_seqs = max_seqs;
  return o;
}

// A scheduler over a pool of n_blocks blocks of block_size tokens.
struct Fixture {
  Fixture(int32_t block_size, int32_t n_blocks, const EngineOptions& o)
      : kv(shape(block_size), n_blocks), blocks(kv), sched(o, blocks) {}

  // A request of `prompt` tokens, arriving now.
  Sequence* add(int32_t prompt, int32_t priority = 0) {
    auto s = std::make_unique<Sequence>();
    s->request_id = next_arrival;
    s->arrival = next_arrival++;
    s->priority = priority;
    s->tokens.assign(size_t(prompt), 5);
    s->n_prompt = prompt;
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  // The engine's part of a step: computed tokens advance, sampled rows append a token.
  void apply(const StepPlan& plan) {
    for (const ScheduledSeq& s : plan.seqs) {
      s.seq->n_computed += s.n_tokens;
      if (s.sample) s.seq->tokens.push_back(7);
    }
  }
  const StepPlan& step() {
    const StepPlan& plan = sched.schedule();
    check(plan);
    apply(plan);
    return plan;
  }
  void check(const StepPlan& plan) const {
    int32_t total = 0;
    for (const ScheduledSeq& s : plan.seqs) {
      EXPECT_GE(s.n_tokens, 1);
      EXPECT_EQ(s.sample, s.seq->n_computed + s.n_tokens == s.seq->num_tokens());
      EXPECT_EQ(s.seq->state, SeqState::Running);
      // The blocks for the step's tokens are there.
      const int32_t bs = kv.block_size();
      EXPECT_GE(int32_t(s.seq->block_table.size()) * bs, s.seq->n_computed + s.n_tokens);
      total += s.n_tokens;
    }
    EXPECT_EQ(plan.n_tokens, total);
    EXPECT_LE(plan.n_tokens, opts_budget());
  }
  int32_t opts_budget() const { return budget; }

  // n_tokens planned for seq, 0 when it is not in the plan.
  static int32_t planned(const StepPlan& plan, const Sequence* seq) {
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.seq == seq) return s.n_tokens;
    }
    return 0;
  }

  PagedKVCache kv;
  BlockManager blocks;
  Scheduler sched;
  int32_t budget = 0;
  uint64_t next_arrival = 0;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

std::unique_ptr<Fixture> make(int32_t block_size, int32_t n_blocks, const EngineOptions& o) {
  auto f = std::make_unique<Fixture>(block_size, n_blocks, o);
  f->budget = o.max_batched_tokens;
  return f;
}

TEST(SchedulerTest, DecodesComeFirstThenPrefillChunks) {
  auto f = make(4, 64, options(8));
  Sequence* a = f->add(4);
  const StepPlan& p1 = f->step();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].n_tokens, 4);
  EXPECT_TRUE(p1.seqs[0].sample);

  Sequence* b = f->add(10);
  const StepPlan& p2 = f->step();
  ASSERT_EQ(p2.seqs.size(), 2u);
  EXPECT_EQ(p2.seqs[0].seq, a) << "the decode comes first";
  EXPECT_EQ(p2.seqs[0].n_tokens, 1);
  EXPECT_EQ(p2.seqs[1].seq, b);
  EXPECT_EQ(p2.seqs[1].n_tokens, 7) << "the rest of the budget";
  EXPECT_FALSE(p2.seqs[1].sample);

  const StepPlan& p3 = f->step();
  ASSERT_EQ(p3.seqs.size(), 2u);
  EXPECT_EQ(p3.seqs[0].seq, a);
  EXPECT_EQ(p3.seqs[1].seq, b);
  EXPECT_EQ(p3.seqs[1].n_tokens, 3);
  EXPECT_TRUE(p3.seqs[1].sample);

  const StepPlan& p4 = f->step();  // both decode now, in rank order
  ASSERT_EQ(p4.seqs.size(), 2u);
  EXPECT_EQ(p4.seqs[0].seq, a);
  EXPECT_EQ(p4.seqs[1].seq, b);
  EXPECT_EQ(p4.n_tokens, 2);
}

TEST(SchedulerTest, TokenBudgetIsRespected) {
  auto f = make(4, 64, options(10));
  std::vector<Sequence*> s;
  for (int i = 0; i < 5; ++i) s.push_back(f->add(6));
  const StepPlan& p1 = f->step();
  EXPECT_EQ(p1.n_tokens, 10);
  EXPECT_EQ(Fixture::planned(p1, s[0]), 6);
  EXPECT_EQ(Fixture::planned(p1, s[1]), 4);
  EXPECT_EQ(Fixture::planned(p1, s[2]), 0);
  EXPECT_EQ(f->sched.n_running(), 2u);
  EXPECT_EQ(f->sched.n_waiting(), 3u);
  for (int i = 0; i < 20; ++i) {
    const StepPlan& p = f->step();
    EXPECT_LE(p.n_tokens, 10);
  }
}

TEST(SchedulerTest, ChunkedPrefillSplitsALongPrompt) {
  auto f = make(4, 64, options(8));
  Sequence* a = f->add(20);
  const int32_t chunks[] = {8, 8, 4};
  const size_t tables[] = {2, 4, 5};
  for (int i = 0; i < 3; ++i) {
    const StepPlan& p = f->step();
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].n_tokens, chunks[i]);
    EXPECT_EQ(p.seqs[0].sample, i == 2) << "sampled only after the last chunk";
    EXPECT_EQ(a->block_table.size(), tables[i]);
  }
  EXPECT_EQ(a->num_tokens(), 21);
  EXPECT_EQ(a->n_computed, 20);
}

TEST(SchedulerTest, WithoutChunkingAPromptWaitsForRoomInTheBudget) {
  auto f = make(4, 64, options(8, /*chunked=*/false));
  Sequence* a = f->add(5);
  Sequence* b = f->add(5);
  const StepPlan& p1 = f->step();
  EXPECT_EQ(Fixture::planned(p1, a), 5);
  EXPECT_EQ(Fixture::planned(p1, b), 0) << "3 tokens of budget left: no partial prompt";
  const StepPlan& p2 = f->step();
  EXPECT_EQ(Fixture::planned(p2, a), 1);
  EXPECT_EQ(Fixture::planned(p2, b), 5);
}

TEST(SchedulerTest, MaxSeqsCapsTheRunningSequences) {
  auto f = make(4, 64, options(64, true, /*max_seqs=*/2));
  Sequence* a = f->add(3);
  Sequence* b = f->add(3);
  Sequence* c = f->add(3);
  f->step();
  EXPECT_EQ(f->sched.n_running(), 2u);
  EXPECT_EQ(c->state, SeqState::Waiting);
  f->step();
  EXPECT_EQ(c->state, SeqState::Waiting);
  f->sched.finish(a);
  EXPECT_TRUE(a->block_table.empty());
  const StepPlan& p = f->step();
  EXPECT_EQ(Fixture::planned(p, c), 3);
  EXPECT_EQ(Fixture::planned(p, b), 1);

  // A request that will fork a second sample reserves its place.
  f->sched.finish(b);
  Sequence* d = f->add(3);
  d->forks_pending = 1;
  const StepPlan& p2 = f->step();
  EXPECT_EQ(Fixture::planned(p2, d), 0) << "c runs: d and its fork need two places";
  f->sched.finish(c);
  const StepPlan& p3 = f->step();
  EXPECT_EQ(Fixture::planned(p3, d), 3);
}

// The samples a running sequence is still to fork count against max_seqs: admitting
// another sequence beside them would overrun it (and the model runner's buffers) once they
// fork.
TEST(SchedulerTest, MaxSeqsCountsTheForksOfRunningSequences) {
  auto f = make(4, 64, options(64, true, /*max_seqs=*/3));
  Sequence* a = f->add(6);
  a->forks_pending = 1;  // n = 2
  Sequence* b = f->add(6);
  Sequence* c = f->add(6);
  const StepPlan& p = f->sched.schedule();
  EXPECT_EQ(Fixture::planned(p, a), 6);
  EXPECT_EQ(Fixture::planned(p, b), 6);
  EXPECT_EQ(Fixture::planned(p, c), 0) << "a, its fork and b already fill max_seqs = 3";
  int64_t places = 0;
  for (const Sequence* s : f->sched.running()) places += 1 + s->forks_pending;
  EXPECT_LE(places, 3);
}

TEST(SchedulerTest, AdmissionOnlyWithFreeBlocks) {
  // 4 blocks of 4 tokens.
  auto f = make(4, 4, options(64, /*chunked=*/false));
  Sequence* a = f->add(12);
  Sequence* b = f->add(8);
  f->step();
  EXPECT_EQ(a->block_table.size(), 3u);
  EXPECT_EQ(b->state, SeqState::Waiting) << "8 tokens need 2 blocks; 1 is free";
  EXPECT_TRUE(b->block_table.empty());
  f->step();  // a's 13th token takes the last block
  EXPECT_EQ(f->blocks.n_available(), 0);
  EXPECT_EQ(b->state, SeqState::Waiting);
  f->sched.finish(a);
  EXPECT_EQ(f->blocks.n_available(), 4);
  const StepPlan& p = f->step();
  EXPECT_EQ(Fixture::planned(p, b), 8);

  // Chunked: a waiting prompt is admitted with what the free blocks hold.
  auto g = make(4, 4, options(64));
  Sequence* c = g->add(12);
  Sequence* d = g->add(8);
  const StepPlan& q = g->step();
  EXPECT_EQ(Fixture::planned(q, c), 12);
  EXPECT_EQ(Fixture::planned(q, d), 4);
  EXPECT_EQ(g->blocks.n_available(), 0);
}

// Three sequences fill the pool; the next decodes need blocks. The victim is the lowest rank:
// the worst priority, then the latest arrival.
TEST(SchedulerTest, PreemptionPicksTheLowestRank) {
  for (bool by_priority : {true, false}) {
    SCOPED_TRACE(by_priority ? "by priority" : "by arrival");
    auto f = make(4, 6, options(64));
    Sequence* a = f->add(8, by_priority ? 1 : 0);
    Sequence* b = f->add(8);
    Sequence* c = f->add(8);
    f->step();
    ASSERT_EQ(f->blocks.n_available(), 0);
    Sequence* victim = by_priority ? a : c;
    const StepPlan& p = f->step();
    ASSERT_EQ(p.preempted.size(), 1u);
    EXPECT_EQ(p.preempted[0], victim);
    EXPECT_EQ(victim->state, SeqState::Preempted);
    EXPECT_TRUE(victim->block_table.empty());
    EXPECT_EQ(victim->n_computed, 0) << "recompute mode starts it over";
    EXPECT_EQ(victim->preemptions, 1);
    EXPECT_EQ(Fixture::planned(p, victim), 0);
    for (Sequence* s : {a, b, c}) {
      if (s != victim) {
        EXPECT_EQ(Fixture::planned(p, s), 1);
      }
    }
    ASSERT_EQ(f->sched.waiting().size(), 1u);
    EXPECT_EQ(f->sched.waiting()[0], victim);
    EXPECT_EQ(f->sched.stats().preemptions, 1);
  }
}

TEST(SchedulerTest, SwapPreemptionKeepsTheComputedTokens) {
  EngineOptions o = options(64);
  o.preemption = PreemptionMode::Swap;
  auto f = make(4, 6, o);
  f->add(8);
  f->add(8);
  Sequence* c = f->add(8);
  f->step();
  const StepPlan& p = f->step();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], c);
  EXPECT_TRUE(c->swapped());
  EXPECT_EQ(c->n_swapped_blocks, 2);
  EXPECT_EQ(c->n_computed, 8);
  EXPECT_EQ(f->blocks.swapped_bytes(), 2 * f->kv.shape().bytes_per_block());
  EXPECT_EQ(f->sched.stats().swaps_out, 1);
  // Finishing it while swapped drops its host copy.
  f->sched.finish(c);
  EXPECT_EQ(f->blocks.swapped_bytes(), 0u);
}

// A preempted sequence keeps its rank: it resumes before a later arrival, even one that
// would fit; and no one is admitted in the step that had to preempt.
TEST(SchedulerTest, PreemptedSequencesResumeAheadOfLaterArrivals) {
  auto f = make(4, 6, options(64, /*chunked=*/false));
  Sequence* a = f->add(8);
  Sequence* b = f->add(6);  // room for two more tokens in its second block
  Sequence* c = f->add(8);
  f->step();
  ASSERT_EQ(f->blocks.n_available(), 0);
  Sequence* d = f->add(1);
  const StepPlan& p2 = f->step();
  ASSERT_EQ(p2.preempted.size(), 1u);
  EXPECT_EQ(p2.preempted[0], c);
  EXPECT_EQ(f->blocks.n_available(), 1) << "c's 2 blocks freed, a took one";
  EXPECT_EQ(Fixture::planned(p2, d), 0) << "admitted in a step that preempted";

  const StepPlan& p3 = f->step();
  EXPECT_EQ(Fixture::planned(p3, d), 0) << "d jumped ahead of the preempted c";
  EXPECT_EQ(Fixture::planned(p3, c), 0) << "c needs 3 blocks";
  ASSERT_EQ(f->sched.waiting().size(), 2u);
  EXPECT_EQ(f->sched.waiting()[0], c);
  EXPECT_EQ(f->sched.waiting()[1], d);

  f->sched.finish(a);
  f->sched.finish(b);
  const StepPlan& p4 = f->step();
  ASSERT_EQ(p4.seqs.size(), 2u);
  EXPECT_EQ(p4.seqs[0].seq, c);
  EXPECT_EQ(p4.seqs[0].n_tokens, 9) << "prompt and its output token, recomputed";
  EXPECT_EQ(p4.seqs[1].seq, d);
}

// Two samples share a prompt whose last block is partly filled: the first to write its next
// token into that block copies it; the full block stays shared.
TEST(SchedulerTest, ForkedSamplesCopyASharedPartialBlockOnWrite) {
  auto f = make(4, 16, options(64));
  Sequence* p = f->add(6);
  const StepPlan& plan = f->sched.schedule();
  ASSERT_EQ(plan.seqs.size(), 1u);
  p->n_computed += 6;
  // The engine forks after the prompt: the child shares the parent's blocks.
  std::unique_ptr<Sequence> child = p->fork(1);
  f->blocks.share(*p, *child);
  f->sched.add_forked(child.get());
  p->tokens.push_back(7);
  child->tokens.push_back(8);
  ASSERT_EQ(p->block_table.size(), 2u);
  const int32_t full = p->block_table[0];
  const int32_t partial = p->block_table[1];
  EXPECT_EQ(f->kv.pool().ref_count(full), 2);
  EXPECT_EQ(f->kv.pool().ref_count(partial), 2);
  EXPECT_EQ(f->kv.pool().n_used(), 2);
  EXPECT_EQ(f->blocks.blocks_needed(*p, 1), 1) << "a copy of the shared partial block";

  // Mark the partial block's K so the copy can be recognised.
  auto* k = reinterpret_cast<uint16_t*>(f->kv.layer(0).k_tile(partial, 0));
  for (int32_t i = 0; i < 4 * 4; ++i) k[i] = uint16_t(1000 + i);

  const StepPlan& p2 = f->step();
  ASSERT_EQ(p2.seqs.size(), 2u);
  EXPECT_EQ(p2.seqs[0].seq, p);
  EXPECT_EQ(p2.seqs[1].seq, child.get());
  EXPECT_EQ(p->block_table[0], full);
  EXPECT_EQ(child->block_table[0], full);
  EXPECT_EQ(f->kv.pool().ref_count(full), 2);
  ASSERT_NE(p->block_table[1], child->block_table[1]);
  EXPECT_EQ(f->kv.pool().ref_count(p->block_table[1]), 1);
  EXPECT_EQ(f->kv.pool().ref_count(child->block_table[1]), 1);
  EXPECT_EQ(f->kv.pool().n_used(), 3);
  for (int32_t s : {p->block_table[1], child->block_table[1]}) {
    const auto* kk = reinterpret_cast<const uint16_t*>(f->kv.layer(0).k_tile(s, 0));
    for (int32_t i = 0; i < 2 * 4; ++i) EXPECT_EQ(kk[i], uint16_t(1000 + i)) << "block " << s;
  }
  f->sched.finish(child.get());
  f->sched.finish(p);
  EXPECT_EQ(f->kv.pool().n_used(), 0);
}

TEST(SchedulerTest, ForkedSamplesShareFullBlocksWithoutCopying) {
  auto f = make(4, 16, options(64));
  Sequence* p = f->add(8);
  f->sched.schedule();
  p->n_computed += 8;
  std::unique_ptr<Sequence> child = p->fork(1);
  f->blocks.share(*p, *child);
  f->sched.add_forked(child.get());
  p->tokens.push_back(7);
  child->tokens.push_back(8);
  EXPECT_EQ(f->blocks.blocks_needed(*p, 1), 1) << "one new block, no copy";
  f->step();
  EXPECT_EQ(f->kv.pool().n_used(), 4);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(p->block_table[i], child->block_table[i]);
    EXPECT_EQ(f->kv.pool().ref_count(p->block_table[i]), 2);
  }
  EXPECT_NE(p->block_table[2], child->block_table[2]);
  f->sched.finish(p);
  f->sched.finish(child.get());
  EXPECT_EQ(f->kv.pool().n_used(), 0);
}

}  // namespace
}  // namespace tokamak::scheduler_test
