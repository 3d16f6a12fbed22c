#pragma once
// Scheduler: decides, every engine step, which sequences compute how many tokens.
//
//   schedule():
//     budget = max_batched_tokens
//     1. running decodes (one token each), in rank order; when the pool is out of blocks,
//        preempt the lowest-ranked running sequence (recompute or swap), or the sequence
//        itself if it is the lowest
//     2. running prefills (chunked prefill: as much of the rest as the budget and the free
//        blocks allow)
//     3. waiting sequences in rank order (preempted ones keep their rank, so they resume
//        first), while budget, blocks and max_seqs (which counts the samples a request will
//        fork) allow; chunked prefill off: only whole remaining prompts (except a resumed
//        sequence longer than a step). No admission in a step that had to preempt.
//        A fresh sequence first takes its longest cached prefix (prefix caching on): only
//        the tokens after it are computed and only their blocks counted.
//
// Rank = (priority, arrival, sample index): FCFS with an optional priority. Admission goes
// in rank order, or with SchedulePolicy::Lpm in admission_order() (longest cached prefix
// first within a priority, with a starvation bound). Sequences are owned by the engine; the
// scheduler holds pointers from add() until finish().

#include <cstdint>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_options.h"
#include "engine/sequence.h"

namespace tokamak {

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t n_tokens = 0;  // tokens computed this step, starting at seq->n_computed
  bool sample = false;   // its last token is the last known one: a new token is sampled
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;  // decodes first, then prefill chunks
  int32_t n_tokens = 0;
  std::vector<Sequence*> preempted;  // preempted during this schedule()

  bool empty() const { return seqs.empty(); }
};

struct SchedulerStats {
  int64_t preemptions = 0;  // in all
  int64_t swaps_out = 0;
  int64_t swaps_in = 0;
  // Computed tokens that swapped sequences had to compute again because a KV tier dropped
  // one of their blocks while they were out.
  int64_t swap_lost_tokens = 0;
  // Prefix cache, in tokens: looked up at admission, and found cached (reused).
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
};

class Scheduler {
 public:
  Scheduler(const EngineOptions& opts, BlockManager& blocks);

  // A new (or forked-off) sequence joins the waiting queue.
  void add(Sequence* seq);
  // A sample forked from `parent` after its prompt: it shares parent's blocks and runs at
  // once (right after parent in rank order).
  void add_forked(Sequence* child);
  // seq leaves the scheduler (finished or cancelled); its blocks are freed.
  void finish(Sequence* seq);

  // Plans the next step and allocates the blocks its tokens need. The plan is valid until
  // the next call; an empty plan means there is nothing to do.
  const StepPlan& schedule();

  size_t n_running() const { return running_.size(); }
  size_t n_waiting() const { return waiting_.size(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::vector<Sequence*>& waiting() const { return waiting_; }
  const SchedulerStats& stats() const { return stats_; }

 private:
  // Schedules seq's next `n` tokens (>= 1), preempting running sequences ranked below it
  // while blocks are short. False if it was not scheduled (it may be preempted itself).
  bool try_schedule(Sequence* seq, int32_t n);
  void add_to_plan(Sequence* seq, int32_t n);
  // Whether seq's remaining tokens must be computed in one step (chunked prefill off).
  bool runs_whole(const Sequence& seq) const;
  // The lowest-ranked running sequence holding blocks, ranked below `keep`; null if none.
  Sequence* pick_victim(const Sequence* keep) const;
  void preempt(Sequence* victim);
  void insert_waiting(Sequence* seq);
  // The waiting sequences in the order admission tries them (into order_).
  void admission_order();
  // Takes seq (at most n of its tokens) from waiting into running, swapping it in first if
  // it was swapped out; false when it does not fit (then it holds no blocks, and is still
  // swapped unless its swap-in lost blocks and turned it into a recomputation).
  bool admit(Sequence* seq, int32_t n);
  // Tokens seq can start with in a step with `budget` tokens left (0: it must wait).
  int32_t tokens_to_admit(const Sequence& seq, int32_t budget) const;
  void remove_running(Sequence* seq);

  EngineOptions opts_;
  BlockManager& blocks_;
  std::vector<Sequence*> running_;                    // rank order
  std::vector<Sequence*> waiting_;                    // rank order
  std::vector<Sequence*> snapshot_;                   // running_ at the start of schedule()
  std::vector<Sequence*> order_;                      // waiting_ in admission order
  std::vector<std::pair<int32_t, Sequence*>> keyed_;  // (cached blocks, seq) for Lpm
  StepPlan plan_;
  int32_t budget_ = 0;  // tokens left in the step being planned
  SchedulerStats stats_;
};

}  // namespace tokamak
