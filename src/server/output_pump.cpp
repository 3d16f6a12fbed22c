#include "server/output_pump.h"

#include <cstdio>
#include <exception>

namespace tokamak::server {

OutputPump::OutputPump() : thread_([this] { loop(); }) {}

OutputPump::~OutputPump() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OutputPump::notify(std::weak_ptr<PumpedJob> job) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void OutputPump::loop() {
  std::deque<std::weak_ptr<PumpedJob>> batch;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty() && stop_) return;
      batch.swap(queue_);
    }
    for (auto& weak : batch) {
      if (auto job = weak.lock()) {
        try {
          job->drain();
        } catch (const std::exception& e) {
          // A job's failure must not stop the others' outputs.
          std::fprintf(stderr, "tokamak serve: output pump: %s\n", e.what());
        }
      }
    }
    batch.clear();
  }
}

}  // namespace tokamak::server
