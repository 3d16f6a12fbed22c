#pragma once
// Engine: the serving engine on its own thread. submit() and cancel() may be called from
// any thread; outputs come back through each request's RequestStream.
//
//   auto engine = Engine(model, tokenizer, opts);
//   auto stream = engine.submit({.prompt = ids, .params = p});   // throws RejectedRequest
//   RequestOutput o;
//   while (stream->next(o)) print(o.text);                       // ends after the last sample
//   engine.cancel(stream->id());                                 // from any thread
//
// The engine thread sleeps while there is nothing to run; a submission or cancellation
// wakes it. Cancellation takes effect at the next step boundary: the request's samples end
// with FinishReason::Cancelled and their blocks are free before that step runs. Destroying
// the Engine cancels what is left and joins the thread.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine_core.h"
#include "engine/request_stream.h"

namespace tokamak {

// What one engine step did, for metrics (batch size per step).
struct StepReport {
  int32_t tokens = 0;  // tokens in the step's forward (prefill chunks + decode tokens)
  int32_t seqs = 0;    // sequences in it
  Clock::time_point end;
};

class Engine {
 public:
  Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its outputs arrive on the returned stream. Throws RejectedRequest
  // (see EngineCore::add_request) without queueing anything.
  std::shared_ptr<RequestStream> submit(Request request);
  void cancel(uint64_t request_id);

  // A snapshot, updated after every step.
  EngineStats stats() const;
  // Every KV block as of the last step: the sequences owning it (0 = free, 2+ = shared;
  // capped at 254), or kCachedBlock for a prefix-cached block no sequence uses.
  static constexpr uint8_t kCachedBlock = 255;
  std::vector<uint8_t> block_owners() const;
  // Called on the engine thread after every step that ran tokens; keep it cheap. Set it once,
  // before the first submit().
  void set_step_observer(std::function<void(const StepReport&)> observer);
  const EngineCore& core() const { return core_; }

 private:
  void loop();
  // Copies the core's stats and block owners for other threads; mu_ held.
  void snapshot_locked();

  EngineCore core_;  // touched only by the engine thread after construction (and by
                     // submit's const checks, which read only immutable configuration)

  mutable std::mutex mu_;
  std::condition_variable wake_;
  // A submitted request until the engine thread takes it in at the next step boundary. Its
  // arrival is the submit() time, so that TTFT and queue time include the wait for the step
  // that was running when it came (up to a whole prefill step).
  struct Submitted {
    Request request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point arrival;
  };
  std::vector<Submitted> inbox_;
  std::vector<uint64_t> cancels_;
  std::unordered_map<uint64_t, std::shared_ptr<RequestStream>> streams_;  // engine thread
  uint64_t next_id_ = 1;
  bool stop_ = false;
  // Guarded by mu_. Its `waiting` also counts requests taken from the inbox since the last
  // step, so that submit()'s queue-full check never undercounts.
  EngineStats stats_;
  std::vector<uint8_t> block_owners_;                     // guarded by mu_
  std::function<void(const StepReport&)> step_observer_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tokamak
