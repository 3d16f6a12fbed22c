#pragma once
// BenchClient: one client thread driving many requests of an Engine. Each stream's output
// hook wakes the client, which then drains every stream in flight without blocking. What a
// benchmark measures comes from the engine's own timestamps (SampleMetrics), so how quickly
// the client looks changes no figure; only the moment of the next submission waits for it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace tokamak::cli {

// One request as the client saw it.
struct TrackedRequest {
  uint64_t id = 0;
  int32_t prompt_tokens = 0;
  int32_t tokens = 0;  // output tokens received so far
  std::optional<FinishReason> finish;
  std::string error;                     // with FinishReason::Error
  std::optional<SampleMetrics> metrics;  // with finish

  bool finished() const { return finish.has_value(); }
};

class BenchClient {
 public:
  explicit BenchClient(Engine& engine);

  // Submits `request` (one sample) and returns its index in requests(). Throws Error with the
  // engine's reason when it is rejected.
  size_t submit(Request request);

  // Takes every output that is ready; when there was none, waits up to `timeout` for one and
  // takes what came. Returns how many outputs it took.
  size_t poll(std::chrono::milliseconds timeout);

  // Polls until done() holds. Throws Error when the engine delivers nothing for `stall`.
  void wait_until(const std::function<bool()>& done,
                  std::chrono::seconds stall = std::chrono::seconds(300));

  size_t n_in_flight() const { return in_flight_.size(); }
  const std::vector<TrackedRequest>& requests() const { return requests_; }

 private:
  struct Waker;

  void take(size_t index, RequestOutput& out);

  Engine& engine_;
  std::shared_ptr<Waker> waker_;
  std::vector<TrackedRequest> requests_;
  std::vector<std::shared_ptr<RequestStream>> streams_;  // parallel to requests_
  std::vector<size_t> in_flight_;                        // indexes of unfinished requests
};

// The engine's stats once its snapshot shows no request running or waiting: the engine
// updates the snapshot after it has delivered a step's outputs, so a client that has seen
// every request finish may still read the step before. Throws Error after `limit`.
EngineStats idle_stats(const Engine& engine,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(10000));

}  // namespace tokamak::cli
