#include "cli/bench_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace tokamak::cli {

// Set by any stream's output hook (on the engine thread), cleared by the client when it
// looks. A flag rather than a count: one look drains every stream.
struct BenchClient::Waker {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;

  void notify() {
    {
      std::lock_guard lock(mu);
      ready = true;
    }
    cv.notify_one();
  }
  void wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, timeout, [&] { return ready; });
    ready = false;
  }
};

BenchClient::BenchClient(Engine& engine) : engine_(engine), waker_(std::make_shared<Waker>()) {}

size_t BenchClient::submit(Request request) {
  const size_t index = requests_.size();
  TrackedRequest tracked;
  tracked.prompt_tokens = static_cast<int32_t>(request.prompt.size());
  std::shared_ptr<RequestStream> stream;
  try {
    stream = engine_.submit(std::move(request));
  } catch (const RejectedRequest& e) {
    throw Error(fmt::format("the engine rejected benchmark request {}: {}", index, e.what()));
  }
  // Outputs pushed before the hook is set are found by the next poll, which drains anyway.
  stream->set_on_output([waker = waker_] { waker->notify(); });
  tracked.id = stream->id();
  requests_.push_back(std::move(tracked));
  streams_.push_back(std::move(stream));
  in_flight_.push_back(index);
  return index;
}

void BenchClient::take(size_t index, RequestOutput& out) {
  TrackedRequest& r = requests_[index];
  r.tokens += static_cast<int32_t>(out.token_ids.size());
  if (out.finish) {
    r.finish = out.finish;
    r.error = std::move(out.error);
    r.metrics = std::move(out.metrics);
  }
}

size_t BenchClient::poll(std::chrono::milliseconds timeout) {
  const auto drain = [&] {
    size_t taken = 0;
    for (size_t index : in_flight_) {
      while (auto out = streams_[index]->try_next()) {
        take(index, *out);
        ++taken;
      }
    }
    std::erase_if(in_flight_, [&](size_t index) { return streams_[index]->done(); });
    return taken;
  };
  size_t taken = drain();
  if (taken == 0 && !in_flight_.empty()) {
    waker_->wait(timeout);
    taken = drain();
  }
  return taken;
}

void BenchClient::wait_until(const std::function<bool()>& done, std::chrono::seconds stall) {
  auto last_output = std::chrono::steady_clock::now();
  while (!done()) {
    if (in_flight_.empty()) throw Error("benchmark waits for requests, but none is in flight");
    if (poll(std::chrono::milliseconds(100)) > 0) {
      last_output = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_output > stall) {
      throw Error(fmt::format("the engine delivered no output for {} s with {} requests in flight",
                              stall.count(), in_flight_.size()));
    }
  }
}

EngineStats idle_stats(const Engine& engine, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    const EngineStats stats = engine.stats();
    if (stats.running == 0 && stats.waiting == 0) return stats;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(
          fmt::format("every request finished, but the engine still reports {} running "
                      "and {} waiting after {} ms",
                      stats.running, stats.waiting, limit.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace tokamak::cli
