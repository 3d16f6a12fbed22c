#include "engine/engine.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace tokamak {

Engine::Engine(Model& model, const Tokenizer& tokenizer, const EngineOptions& opts)
    : core_(model, tokenizer, opts) {
  snapshot_locked();  // no other thread yet
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestStream> Engine::submit(Request request) {
  core_.check_request(request);  // throws RejectedRequest before anything is queued
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard lock(mu_);
    if (stop_) {
      throw RejectedRequest(RejectedRequest::Kind::QueueFull, "the engine is shutting down");
    }
    if (static_cast<size_t>(stats_.waiting) + inbox_.size() >= core_.options().max_waiting) {
      throw RejectedRequest(RejectedRequest::Kind::QueueFull,
                            "the queue is full (" + std::to_string(core_.options().max_waiting) +
                                " requests waiting); retry later");
    }
    stream = std::make_shared<RequestStream>(next_id_++, request.n);
    inbox_.push_back({std::move(request), stream, Clock::now()});
  }
  wake_.notify_all();
  return stream;
}

void Engine::cancel(uint64_t request_id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(request_id);
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::vector<uint8_t> Engine::block_owners() const {
  std::lock_guard lock(mu_);
  return block_owners_;
}

void Engine::set_step_observer(std::function<void(const StepReport&)> observer) {
  std::lock_guard lock(mu_);
  step_observer_ = std::move(observer);
}

void Engine::snapshot_locked() {
  stats_ = core_.stats();
  const BlockPool& pool = core_.kv_cache().pool();
  block_owners_.resize(static_cast<size_t>(pool.n_blocks()));
  for (int32_t b = 0; b < pool.n_blocks(); ++b) {
    const BlockState st = core_.block_state(b);
    block_owners_[static_cast<size_t>(b)] =
        st.cached && st.owners == 0 ? kCachedBlock
                                    : static_cast<uint8_t>(std::min<int32_t>(st.owners, 254));
  }
}

void Engine::loop() {
  std::vector<Submitted> arrivals;
  std::vector<uint64_t> cancels;
  std::vector<RequestOutput> outputs;
  bool stopping = false;
  bool progressed = true;
  while (true) {
    {
      std::unique_lock lock(mu_);
      const auto ready = [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || (progressed && core_.has_work());
      };
      // A step that could not run anything (it should not happen: a lone request always
      // fits) is retried after a pause rather than in a busy loop.
      if (progressed) {
        wake_.wait(lock, ready);
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(10), ready);
      }
      // They wait in the core from now on: count them there until the next snapshot, so
      // that submit()'s queue check never undercounts.
      stats_.waiting += static_cast<int32_t>(inbox_.size());
      arrivals.swap(inbox_);
      cancels.swap(cancels_);
      stopping = stop_;
    }
    const auto now = Clock::now();
    for (auto& [request, stream, arrival] : arrivals) {
      const uint64_t id = stream->id();
      try {
        core_.add_request(id, std::move(request), arrival);
        streams_.emplace(id, stream);
      } catch (const std::exception& e) {
        // The queue limit (submit checked the rest) or memory: end this stream, keep serving.
        for (int32_t i = 0; i < request.n; ++i) {
          RequestOutput o;
          o.request_id = id;
          o.index = i;
          o.time = now;
          o.finish = FinishReason::Error;
          o.error = e.what();
          stream->push(std::move(o));
        }
      }
    }
    arrivals.clear();
    for (uint64_t id : cancels) core_.cancel(id);
    cancels.clear();
    if (stopping) {
      for (auto& [id, stream] : streams_) core_.cancel(id);
    }

    outputs.clear();
    const int64_t steps_before = core_.stats().steps;
    progressed = core_.step(outputs);
    std::function<void(const StepReport&)> observer;
    StepReport report;
    {
      // Before the outputs: a client that sees its request finish then reads stats that
      // include the step that finished it.
      std::lock_guard lock(mu_);
      snapshot_locked();
      if (stats_.steps != steps_before && stats_.last_step_tokens > 0) {
        observer = step_observer_;
        report = {
            .tokens = stats_.last_step_tokens, .seqs = stats_.last_step_seqs, .end = Clock::now()};
      }
    }
    if (observer) observer(report);
    for (RequestOutput& o : outputs) {
      auto it = streams_.find(o.request_id);
      if (it == streams_.end()) continue;
      const std::shared_ptr<RequestStream> stream = it->second;
      stream->push(std::move(o));
      if (stream->all_finished()) streams_.erase(it);
    }
    if (stopping && streams_.empty()) return;
  }
}

}  // namespace tokamak
