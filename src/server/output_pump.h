#pragma once
// OutputPump: one thread that turns engine outputs into HTTP bytes. The engine thread only
// signals that a job has outputs (cheap, never blocks); JSON building and writing happen
// here, off the engine's step path.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace tokamak::server {

class PumpedJob {
 public:
  virtual ~PumpedJob() = default;
  // Takes and handles every output that has arrived. Runs on the pump thread only.
  virtual void drain() = 0;
};

class OutputPump {
 public:
  OutputPump();
  ~OutputPump();  // drains what is queued, then joins
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // From any thread: run job->drain() soon. A job queued twice before it runs drains once
  // or twice; drain() takes whatever is there.
  void notify(std::weak_ptr<PumpedJob> job);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::weak_ptr<PumpedJob>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tokamak::server
