#pragma once
// RequestStream: where the engine thread delivers one request's outputs and a client thread
// takes them. Thread-safe; the engine never blocks on it (the queue grows instead).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace tokamak {

class RequestStream {
 public:
  RequestStream(uint64_t id, int32_t n_samples) : id_(id), n_samples_(n_samples) {}

  uint64_t id() const { return id_; }

  // Blocks until an output is ready (true) or every sample has finished and all outputs
  // were taken (false).
  bool next(RequestOutput& out);
  // Like next(), giving up after `timeout` (nullopt: nothing yet, or the stream is done;
  // tell them apart with done()).
  std::optional<RequestOutput> next_for(std::chrono::milliseconds timeout);
  std::optional<RequestOutput> try_next();
  // Every sample finished and every output taken.
  bool done() const;
  // Every sample's final output has been pushed (some may not be taken yet).
  bool all_finished() const;

  // Called on the engine thread after each push (cheap and non-blocking: wake a waiter,
  // post to an event loop). Set it before the first output can arrive, i.e. right after
  // submit(); it may be called once more after being replaced.
  void set_on_output(std::function<void()> fn);

  // Engine side.
  void push(RequestOutput out);

 private:
  const uint64_t id_;
  const int32_t n_samples_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  int32_t n_finished_ = 0;
  std::function<void()> on_output_;
};

}  // namespace tokamak
