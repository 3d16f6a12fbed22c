#pragma once
// How the serving engine schedules and how much KV memory it takes.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/kv_dtype.h"
#include "kv/kv_budget.h"
#include "kv/kv_tiers.h"

namespace tokamak {

enum class PreemptionMode {
  Recompute,  // drop the victim's KV blocks; recompute prompt + output when it resumes
  Swap,       // copy the victim's KV blocks to host memory and back when it resumes
};

// Which waiting request is admitted first (within a priority level).
enum class SchedulePolicy {
  Fcfs,  // arrival order
  // Longest cached prefix first (as SGLang's "lpm"), so that requests sharing a prefix run
  // while it is cached. A request bypassed by later arrivals lpm_max_bypass times, or a
  // preempted one, goes first regardless. With more than kLpmMaxWaiting waiting, FCFS
  // (the lookups would cost more than they save).
  Lpm,
};

struct EngineOptions {
  int32_t block_size = 16;  // tokens per KV block
  KVBudget kv_budget;       // how many blocks the pool gets (default 25% of free memory)
  KVDTypes kv_dtype =
      KVDType::F16;  // element types of the pool's keys and values (core/kv_dtype.h)
  // Most tokens computed in one step (decode tokens + prefill chunks). Must not exceed the
  // model's max_batch_tokens. With chunked prefill off, also the longest prompt accepted.
  int32_t max_batched_tokens = 512;
  int32_t max_seqs = 64;  // most sequences running at once
  // Split long prompts across steps so running requests keep their pace. Off: a prompt is
  // computed in one step, or waits until the budget has room for all of it.
  bool chunked_prefill = true;
  PreemptionMode preemption = PreemptionMode::Recompute;
  // Host memory for swapped blocks (Swap mode). With a host tier (kv_tiers.host_bytes > 0)
  // swapped blocks share the tier's budget instead and this is not used.
  size_t swap_space_bytes = size_t{4} << 30;
  // Context limit per sequence (prompt + output); 0 = the model's training context. Capped
  // by the pool: one sequence must fit in it alone.
  int32_t max_model_len = 0;
  size_t max_waiting = 4096;  // submissions beyond this many waiting are refused (queue full)
  // Reuse the K/V of cached prompt prefixes (kv/prefix_cache.h). Outputs are the same
  // either way; only the work differs.
  bool prefix_caching = true;
  // Where cached blocks the pool evicts go instead of away (kv/kv_tiers.h): host memory,
  // then a directory. Off by default: on a CPU the pool is host memory already, and a
  // bigger pool serves the same hits without copies; tiers pay off for a GPU pool, for
  // memory not reserved up front, and for the disk tier's reuse across restarts. Needs
  // prefix_caching; the disk tier needs kv_tiers.model_identity (set once the model is
  // loaded: validate() does not ask for it, the engine refuses to start without it).
  KVTierOptions kv_tiers;
  SchedulePolicy schedule_policy = SchedulePolicy::Fcfs;
  int32_t lpm_max_bypass = 16;  // starvation bound of SchedulePolicy::Lpm
  // Sliding KV window (engine/kv_window.h): > 0 keeps only the first kv_sink tokens and the
  // last kv_window of each sequence, so prompts and generations may exceed the context.
  int32_t kv_window = 0;
  int32_t kv_sink = 4;
  // With kv_window: > 0 keeps this many of the window's tokens (whole blocks) for the
  // attention they received instead of their age (heavy hitters, engine/kv_heavy.h).
  int32_t kv_heavy = 0;
  // Hot window (kv/paged_kv_cache.h): > 0 keeps each sequence's newest kv_hot_window tokens
  // (whole blocks, the one being filled counted) in F16 beside the main pool, which then
  // holds whole blocks only, encoded in kv_dtype as they leave the window (hot/cold). q4
  // keys always have one (one block at least): they are quantized per channel across a
  // block (KVDType::Q4C). Needs a quantized kv_dtype.
  int32_t kv_hot_window = 0;
  static constexpr size_t kLpmMaxWaiting = 128;
};

// nullopt when the options are possible; otherwise a one-line message naming the option.
std::optional<std::string> validate(const EngineOptions& opts);


const char* preemption_mode_name(PreemptionMode mode);    // "recompute", "swap"
const char* schedule_policy_name(SchedulePolicy policy);  // "fcfs", "lpm"

}  // namespace tokamak
