#include "engine/scheduler.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <optional>

namespace tokamak {

Scheduler::Scheduler(const EngineOptions& opts, BlockManager& blocks)
    : opts_(opts), blocks_(blocks) {
  running_.reserve(static_cast<size_t>(opts.max_seqs));
  snapshot_.reserve(static_cast<size_t>(opts.max_seqs));
  keyed_.reserve(EngineOptions::kLpmMaxWaiting);
  plan_.seqs.reserve(static_cast<size_t>(opts.max_seqs));
}

void Scheduler::add(Sequence* seq) {
  seq->state = SeqState::Waiting;
  insert_waiting(seq);
}

void Scheduler::add_forked(Sequence* child) {
  child->state = SeqState::Running;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), child, runs_before), child);
}

void Scheduler::finish(Sequence* seq) {
  if (seq->state == SeqState::Running) {
    remove_running(seq);
  } else if (seq->state == SeqState::Waiting || seq->state == SeqState::Preempted) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  }
  blocks_.free(*seq);
  seq->state = SeqState::Finished;
}

const StepPlan& Scheduler::schedule() {
  plan_.seqs.clear();
  plan_.preempted.clear();
  plan_.n_tokens = 0;
  budget_ = opts_.max_batched_tokens;

  // 1. Decodes, highest rank first: each needs one token and perhaps one block.
  snapshot_.assign(running_.begin(), running_.end());
  for (Sequence* seq : snapshot_) {
    if (budget_ == 0) break;
    if (seq->state != SeqState::Running || seq->uncomputed() != 1) continue;
    try_schedule(seq, 1);
  }

  // 2. Running prefills (started earlier, chunked): as much of the rest as fits.
  for (Sequence* seq : snapshot_) {
    if (budget_ == 0) break;
    if (seq->state != SeqState::Running || seq->uncomputed() <= 1) continue;
    const int32_t n = seq->uncomputed();
    if (runs_whole(*seq) && n > budget_) continue;
    try_schedule(seq, std::min(n, budget_));
  }

  // 3. Admission, in rank order, only while nothing had to be preempted: a step that ran
  // out of blocks has none to spare for newcomers.
  // Places in max_seqs: running sequences and the samples they are yet to fork.
  int64_t places = 0;
  for (const Sequence* seq : running_) places += 1 + seq->forks_pending;
  admission_order();
  for (Sequence* seq : order_) {
    if (!plan_.preempted.empty() || budget_ == 0) break;
    if (places + 1 + seq->forks_pending > opts_.max_seqs) break;
    // Head-of-line: the first that does not fit stops admission, so that a large request is
    // not overtaken forever by small ones.
    if (!admit(seq, budget_)) break;
    places += 1 + seq->forks_pending;
  }
  return plan_;
}

int32_t Scheduler::tokens_to_admit(const Sequence& seq, int32_t budget) const {
  const int32_t rest = seq.uncomputed();
  const bool whole = runs_whole(seq);
  const int32_t n = std::min(rest, budget);
  const int32_t fit = (whole && rest > budget) ? 0 : blocks_.tokens_that_fit(seq, n);
  return fit == 0 || (whole && fit < n) ? 0 : fit;
}

bool Scheduler::admit(Sequence* seq, int32_t budget) {
  // A swapped sequence comes back when its blocks and its next tokens fit (every swapped
  // block counted as needed, so its K/V can be loaded before anything is planned).
  if (seq->swapped()) {
    if (tokens_to_admit(*seq, budget) == 0) return false;
    const int32_t lost = blocks_.swap_in(*seq);
    ++stats_.swaps_in;
    stats_.swap_lost_tokens += lost;
  }
  // The cached prefix first: what is left to compute, and the blocks for it, depend on it.
  const std::optional<int32_t> hit = blocks_.match_prefix(*seq);
  const int32_t fit = tokens_to_admit(*seq, budget);
  if (fit == 0) {
    // Give back a match, or what a swap-in that lost blocks found (a whole swap-in fits by
    // the check above); the cached blocks are matched again next time.
    if (hit || !seq->block_table.empty()) {
      blocks_.free(*seq);
      seq->n_computed = 0;
    }
    return false;
  }
  if (hit) {
    stats_.prefix_queries += seq->num_tokens();
    stats_.prefix_hits += *hit;
  }
  if (!seq->cached_at_admission) seq->cached_at_admission = hit.value_or(0);
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  if (opts_.schedule_policy == SchedulePolicy::Lpm) {
    for (Sequence* w : waiting_) {
      if (runs_before(w, seq)) ++w->bypassed;
    }
  }
  seq->state = SeqState::Running;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, runs_before), seq);
  add_to_plan(seq, fit);
  return true;
}

void Scheduler::admission_order() {
  order_.assign(waiting_.begin(), waiting_.end());
  const PrefixCache* cache = blocks_.prefix_cache();
  if (opts_.schedule_policy != SchedulePolicy::Lpm || cache == nullptr || order_.size() < 2 ||
      order_.size() > EngineOptions::kLpmMaxWaiting) {
    return;
  }
  // Key: priority first (as always), then the urgent ones (preempted, or bypassed too
  // often) in rank order, then the longest cached prefix, then rank.
  keyed_.clear();
  for (Sequence* seq : order_) {
    const bool urgent = seq->state == SeqState::Preempted || seq->bypassed >= opts_.lpm_max_bypass;
    keyed_.emplace_back(urgent ? std::numeric_limits<int32_t>::max() : cache->peek(seq->tokens),
                        seq);
  }
  std::sort(keyed_.begin(), keyed_.end(), [](const auto& a, const auto& b) {
    if (a.second->priority != b.second->priority) return a.second->priority < b.second->priority;
    if (a.first != b.first) return a.first > b.first;
    return runs_before(a.second, b.second);
  });
  for (size_t i = 0; i < keyed_.size(); ++i) order_[i] = keyed_[i].second;
}

bool Scheduler::try_schedule(Sequence* seq, int32_t n) {
  const bool decode = seq->uncomputed() == 1;
  while (true) {
    // A prefill chunk shrinks to the free blocks (chunked prefill only); a decode token or
    // a whole prompt needs all of its blocks.
    const int32_t fit = blocks_.tokens_that_fit(*seq, n);
    const int32_t take = (decode || runs_whole(*seq)) ? (fit == n ? n : 0) : fit;
    if (take > 0) {
      add_to_plan(seq, take);
      return true;
    }
    Sequence* victim = pick_victim(seq);
    if (victim == nullptr) {
      // Nobody ranked below it holds blocks. A decode gives its own blocks up so that the
      // sequences ahead of it can go on; a prefill waits for them to finish.
      if (decode) preempt(seq);
      return false;
    }
    preempt(victim);
  }
}

void Scheduler::add_to_plan(Sequence* seq, int32_t n) {
  blocks_.allocate(*seq, n);
  const bool sample = seq->n_computed + n == seq->num_tokens();
  plan_.seqs.push_back({seq, n, sample});
  plan_.n_tokens += n;
  budget_ -= n;
}

bool Scheduler::runs_whole(const Sequence& seq) const {
  // Without chunked prefill a prompt runs in one step. A preempted sequence resuming by
  // recomputation may have grown past one step's budget: it is split rather than stuck.
  return !opts_.chunked_prefill && seq.uncomputed() <= opts_.max_batched_tokens;
}

Sequence* Scheduler::pick_victim(const Sequence* keep) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (*it == keep) return nullptr;  // everything further back is ranked above keep
    if ((*it)->block_table.empty()) continue;
    return *it;
  }
  return nullptr;
}

void Scheduler::preempt(Sequence* victim) {
  // Undo its part of this step's plan, if it had one.
  auto planned = std::find_if(plan_.seqs.begin(), plan_.seqs.end(),
                              [&](const ScheduledSeq& s) { return s.seq == victim; });
  if (planned != plan_.seqs.end()) {
    plan_.n_tokens -= planned->n_tokens;
    budget_ += planned->n_tokens;
    plan_.seqs.erase(planned);
  }
  bool swapped = false;
  if (opts_.preemption == PreemptionMode::Swap && victim->n_computed > 0) {
    swapped = blocks_.swap_out(*victim, opts_.swap_space_bytes);
    if (swapped) ++stats_.swaps_out;
  }
  if (!swapped) {
    blocks_.free(*victim);
    victim->n_computed = 0;  // recompute: prompt and output so far are prefilled again
  }
  ++victim->preemptions;
  ++stats_.preemptions;
  remove_running(victim);
  victim->state = SeqState::Preempted;
  insert_waiting(victim);
  plan_.preempted.push_back(victim);
}

void Scheduler::insert_waiting(Sequence* seq) {
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, runs_before), seq);
}

void Scheduler::remove_running(Sequence* seq) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
}

}  // namespace tokamak
