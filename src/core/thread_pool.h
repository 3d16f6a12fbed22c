#pragma once
// A persistent pool of kernel threads, created once; the calling thread takes part.
//
// parallel_for(n, fn) cuts [0, n) into a fixed set of contiguous chunks that depends only on
// n and the pool size (at most 4 per thread), and every chunk is run exactly once as
// fn(begin, end). Threads claim chunks from a shared counter, so a thread that the OS has
// not scheduled yet (on a busy machine) does not hold the others up: the caller may end up
// running every chunk itself. Which thread runs a chunk may vary; what is computed never
// does, as long as fn computes each element from its index alone (every kernel here keeps a
// fixed reduction order per output element), so results never depend on scheduling or on
// the thread count.
//
// Idle workers spin briefly on a generation counter, then sleep on a condition variable.
// One dispatch at a time: calls from several threads are serialised; a task must not call
// back into the same pool.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tokamak {

class ThreadPool {
 public:
  // n_threads >= 1 threads in all (n_threads - 1 workers plus the caller); 0 means one per
  // hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end) once for each chunk of [0, n) (see above); returns when all are
  // done. An exception thrown by fn is rethrown here (the first one).
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

  // The chunking of parallel_for: chunk `index` of [0, n) cut into `parts` contiguous parts.
  static std::pair<int64_t, int64_t> split(int64_t n, int parts, int index) {
    return {n * index / parts, n * (index + 1) / parts};
  }
  int chunks_for(int64_t n) const {
    const int64_t most = static_cast<int64_t>(n_threads_) * kChunksPerThread;
    return static_cast<int>(n < most ? n : most);
  }

 private:
  static constexpr int kChunksPerThread = 4;

  // Runs chunk tasks of dispatch `gen` until none is left unclaimed.
  void work_on(uint32_t gen);
  void dispatch(int n_chunks, const std::function<void(int)>& chunk_fn);
  void worker_loop();

  int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex dispatch_mu_;  // one dispatch at a time

  // The current dispatch: task_ and n_chunks_ are set before state_ publishes it.
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<int> n_chunks_{0};
  // (generation << 32) | next unclaimed chunk.
  std::atomic<uint64_t> state_{0};
  std::atomic<int> done_{0};  // chunks finished in the current dispatch
  std::atomic<bool> stop_{false};

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::atomic<bool> caller_sleeping_{false};

  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace tokamak
