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
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine_core.h"
#include "engine/request_stream.h"

namespace tokamak {

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
  const EngineCore& core() const { return core_; }

 private:
  void loop();

  EngineCore core_;  // touched only by the engine thread after construction (and by
                     // submit's const checks, which read only immutable configuration)

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<Request, std::shared_ptr<RequestStream>>> inbox_;
  std::vector<uint64_t> cancels_;
  std::unordered_map<uint64_t, std::shared_ptr<RequestStream>> streams_;  // engine thread
  uint64_t next_id_ = 1;
  bool stop_ = false;
  // Guarded by mu_. Its `waiting` also counts requests taken from the inbox since the last
  // step, so that submit()'s queue-full check never undercounts.
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace tokamak
