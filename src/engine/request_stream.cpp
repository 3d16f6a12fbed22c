#include "engine/request_stream.h"

#include <utility>

namespace tokamak {

void RequestStream::push(RequestOutput out) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    if (out.finish) ++n_finished_;
    queue_.push_back(std::move(out));
    notify = on_output_;
  }
  cv_.notify_all();
  if (notify) notify();
}

bool RequestStream::next(RequestOutput& out) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || n_finished_ == n_samples_; });
  if (queue_.empty()) return false;
  out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

std::optional<RequestOutput> RequestStream::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || n_finished_ == n_samples_; });
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

std::optional<RequestOutput> RequestStream::try_next() {
  return next_for(std::chrono::milliseconds(0));
}

bool RequestStream::done() const {
  std::lock_guard lock(mu_);
  return queue_.empty() && n_finished_ == n_samples_;
}

bool RequestStream::all_finished() const {
  std::lock_guard lock(mu_);
  return n_finished_ == n_samples_;
}

void RequestStream::set_on_output(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  on_output_ = std::move(fn);
}

}  // namespace tokamak
