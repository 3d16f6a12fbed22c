#pragma once
// GenerationJob: one /v1/completions or /v1/chat/completions request in flight. It submits
// one engine request per prompt (n samples each), turns their outputs into the response
// (SSE chunks as they come, or one JSON body at the end), and ends the engine requests when
// the client goes away or the server shuts down.
//
// Threads: start() on an HTTP thread; outputs are handled in drain() on the OutputPump
// thread only (the engine thread just signals); cancel() and abort() from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/http_types.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/output_pump.h"

namespace tokamak::server {

class ServerMetrics;

class GenerationJob : public PumpedJob, public std::enable_shared_from_this<GenerationJob> {
 public:
  struct Context {
    Engine* engine = nullptr;
    OutputPump* pump = nullptr;
    ServerMetrics* metrics = nullptr;
    const Tokenizer* tokenizer = nullptr;
  };

  // on_done runs once, on the pump thread, after the response is complete (or abandoned).
  GenerationJob(GenerationRequest request, ResponseIdentity identity,
                std::shared_ptr<ResponseWriter> writer, Context context,
                std::function<void()> on_done);

  // Queues the request in the engine. Throws ApiError (400 impossible request, 429 queue
  // full) with nothing left queued; the caller answers it.
  void start();

  void drain() override;

  // The client went away: end the engine requests (their blocks are freed at the next step).
  void cancel();
  // Shutdown: answer now with an error (an error event in a stream, 503 otherwise) and end
  // the engine requests.
  void abort(const std::string& message);
  // Set before start(): runs once, on the pump thread, when the job is over.
  void set_on_done(std::function<void()> fn) { on_done_ = std::move(fn); }

 private:
  struct PromptState {
    std::shared_ptr<RequestStream> stream;
    int32_t finished = 0;
    int32_t generated = 0;
    std::optional<Clock::time_point> prefilled;  // the first token of any of its samples
  };

  void handle(size_t prompt, const RequestOutput& output);
  // Answers with the abort message if abort() asked for it (and nothing was answered yet).
  bool answer_abort();
  void complete();  // the last sample finished: finish the response
  bool streaming() const { return request_.stream; }

  GenerationRequest request_;
  std::shared_ptr<ResponseWriter> writer_;
  Context ctx_;
  std::function<void()> on_done_;
  ResponseBuilder builder_;
  std::vector<PromptState> prompts_;

  // Pump thread only.
  int32_t finished_ = 0;
  bool answered_ = false;  // the response is complete (or was replaced by an error)
  std::string error_;      // the first sample that failed

  std::mutex mu_;              // guards abort_message_
  std::string abort_message_;  // set by abort(), acted on by drain()
  std::atomic<bool> cancelled_{false};
};

}  // namespace tokamak::server
