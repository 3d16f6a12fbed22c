#pragma once
// EngineCore: the serving engine's state and its step, on one thread, no locks.
//
//   step():  cancellations -> scheduler.schedule() -> model_runner.execute() (one forward
//            for every scheduled token) -> sample where a row was sampled -> append, detok,
//            stop checks -> outputs; finished sequences give their blocks back.
//
// Engine (engine.h) runs it on its own thread behind thread-safe submit/cancel; tests and
// offline tools may drive it directly, step by step.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "engine/block_manager.h"
#include "engine/engine_options.h"
#include "engine/kv_window.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {

class Model;
class Tokenizer;

// Why submit() refused a request. The server maps Invalid and TooLong to 400 and QueueFull
// to 503.
class RejectedRequest : public Error {
 public:
  enum class Kind { Invalid, TooLong, QueueFull };
  RejectedRequest(Kind kind, const std::string& what) : Error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// A snapshot of the engine, for metrics and benchmarks.
struct EngineStats {
  int32_t running = 0;
  int32_t waiting = 0;  // preempted ones included
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;       // held by sequences (cached blocks nobody uses excluded)
  int32_t kv_blocks_cached = 0;     // in the prefix cache, used or not
  int32_t kv_blocks_evictable = 0;  // in the prefix cache and used by no sequence
  int32_t kv_blocks_peak = 0;
  // At the step where the most blocks were in use: token slots allocated but not (yet)
  // holding a token, and slots holding one. Unused / used is the pool's internal waste.
  int64_t kv_slots_unused_at_peak = 0;
  int64_t kv_slots_used_at_peak = 0;
  int64_t preemptions = 0;
  // Swap preemption: sequences swapped out and back in, and computed tokens they had to
  // compute again because a KV tier dropped one of their blocks meanwhile.
  int64_t swaps_out = 0;
  int64_t swaps_in = 0;
  int64_t swap_lost_tokens = 0;
  size_t kv_swapped_bytes = 0;  // host memory held by swapped-out sequences now
  int64_t steps = 0;
  int64_t prompt_tokens_computed = 0;  // prefill tokens run (recomputation included)
  int64_t output_tokens = 0;           // tokens sampled
  // Prefix cache, in tokens: prompt (and resumed) tokens looked up, and found cached.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int64_t kv_window_dropped_tokens = 0;  // tokens the KV window slid out of sequences
  // KV tiers (zero when off): blocks copied to / back from host memory and disk, entries
  // pushed out, files rejected as corrupt or foreign, and what each tier holds now.
  KVTierStats kv_tiers;
  int32_t last_step_tokens = 0;  // batch size of the last step, in tokens
  int32_t last_step_seqs = 0;    // and in sequences
};

// One KV block as the dashboard's block map shows it.
struct BlockState {
  int32_t owners = 0;   // sequences whose tables name it (0 = free or only cached)
  bool cached = false;  // in the prefix cache
};

class EngineCore {
 public:
  // Allocates the KV pool from opts.kv_budget (throws Error if the options are invalid, the
  // budget buys not one block, or the model's max_batch_tokens is below
  // opts.max_batched_tokens). `model` and `tokenizer` must outlive the engine.
  EngineCore(Model& model, const Tokenizer& tokenizer, const EngineOptions& opts);
  ~EngineCore();

  // Checks a request and queues it under `id` (unique, chosen by the caller). Throws
  // RejectedRequest: empty prompt, token ids outside the vocabulary, impossible sampling
  // parameters, n outside [1, kMaxSamples], prompt + max_tokens beyond max_model_len (a
  // request that could never fit), or the waiting queue full.
  void add_request(uint64_t id, Request request, Clock::time_point arrival = Clock::now());
  // The checks of add_request that do not depend on the queue; throws like it. Reads only
  // configuration fixed at construction, so any thread may call it.
  void check_request(const Request& request) const;

  // Ends every sample of request `id` with FinishReason::Cancelled and frees its blocks now;
  // the outputs saying so come out of the next step(). Unknown or finished ids are ignored.
  void cancel(uint64_t id);

  // Runs one step; appends the outputs it produced to `out`. Returns false when there was
  // nothing to do (no running or waiting sequence, no pending output).
  bool step(std::vector<RequestOutput>& out);

  bool has_work() const;
  size_t n_requests() const { return requests_.size(); }
  EngineStats stats() const;
  BlockState block_state(int32_t block) const;
  const PrefixCache* prefix_cache() const { return blocks_.prefix_cache(); }  // null when off
  // Frees every cached block no sequence uses (tests check for leaks with it); with tiers,
  // they go down to the host tier (or disk) first.
  void clear_prefix_cache();
  // Moves everything in the host tier down to the disk tier, or drops it without one
  // (tests and `tokamak bench tiers`). Swapped sequences' host bytes stay.
  void flush_host_tier();

  const EngineOptions& options() const { return opts_; }
  // Prompt + output tokens per sequence; with a KV window (sliding_window()), only the
  // default cap of max_tokens: sequences may grow past it.
  int32_t max_model_len() const { return max_model_len_; }
  bool sliding_window() const { return window_.has_value(); }
  const PagedKVCache& kv_cache() const { return kv_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const Model& model() const { return model_; }

 private:
  struct RequestState;

  std::unique_ptr<SampleState> new_sample_state(const RequestState& req, const Sequence& seq,
                                                int32_t index) const;
  void process_step_results(const StepPlan& plan, Clock::time_point start,
                            std::vector<RequestOutput>& out);
  void sample_and_append(Sequence& seq, std::span<float> logits, Clock::time_point now,
                         std::vector<RequestOutput>& out);
  // Appends `token` to seq, streams its text, and finishes it when a stop condition holds.
  void append_token(Sequence& seq, int32_t token, const SampleLogprobs* logprobs,
                    Clock::time_point now, std::vector<RequestOutput>& out);
  // Creates the other samples of seq's request, sharing its blocks, each sampling its first
  // token from `logits` (the prompt's last row).
  void fork_samples(RequestState& req, Sequence& parent, std::span<const float> logits,
                    Clock::time_point now, std::vector<RequestOutput>& out);
  // Ends seq (and the samples it had yet to fork) early: cancelled or failed.
  void finish_sequence(Sequence& seq, FinishReason reason, Clock::time_point now,
                       std::vector<RequestOutput>& out, std::string error = {});
  // Marks seq finished, fills `last` with the reason and metrics, frees its blocks.
  void close_sample(Sequence& seq, FinishReason reason, Clock::time_point now, RequestOutput& last);
  void erase_finished_requests();
  void track_peak_usage(const StepPlan& plan);
  int32_t n_evictable() const;

  Model& model_;
  const Tokenizer& tokenizer_;
  EngineOptions opts_;
  PagedKVCache kv_;
  BlockManager blocks_;
  Scheduler scheduler_;
  ModelRunner runner_;
  int32_t max_model_len_ = 0;
  std::optional<KVWindow> window_;  // opts.kv_window > 0
  std::unordered_map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::vector<uint64_t> finished_requests_;  // erased at the end of a step
  std::vector<RequestOutput> pending_;       // made by cancel(), handed out by step()
  std::vector<float> fork_logits_;           // (n_vocab) the prompt's logits, kept for forks
  std::vector<float> fork_row_;              // (n_vocab) a fork's copy, penalised in place
  SamplerWorkspace workspace_;
  uint64_t next_arrival_ = 0;
  EngineStats stats_;
};

}  // namespace tokamak
