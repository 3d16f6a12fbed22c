#pragma once
// A persistent pool of kernel threads, created once; the calling thread takes part.
//
// parallel_for(n, fn) cuts [0, n) into a fixed set of contiguous chunks that depends only on
// n and the pool size (chunks() below), and every chunk is run exactly once as
// fn(begin, end). Threads claim chunks from a shared counter, so a thread that the OS has
// not scheduled yet (on a busy machine) does not hold the others up: the caller may end up
// running every chunk itself. Which thread runs a chunk may vary; what is computed never
// does, as long as fn computes each element from its index alone (every kernel here keeps a
// fixed reduction order per output element), so results never depend on scheduling or on
// the thread count.
//
// The chunks shrink as the range is used up (guided scheduling): each is 1 / (2 x threads)
// of what is left, down to one index, so the first ones are large (few claims) and the last
// ones small, and the threads finish close together whatever each chunk costs. Equal
// chunks, four a thread, left the two threads of a concurrency-32 decode step finishing a
// matmul 14 us apart on average (up to a whole chunk, ~60 us for the output head), ~1.6 ms
// of a ~30 ms step.
//
// Idle threads spin for a while (kSpin in thread_pool.cpp) on a generation counter, then
// sleep on a condition variable: long enough to bridge the serial work between two kernels
// of one forward pass and between two engine steps, since waking a sleeping thread costs
// tens of microseconds on a virtual machine. One dispatch at a time: calls from several
// threads are serialised; a task must not call back into the same pool.

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

  // The chunking of parallel_for: chunk i is [bounds[i], bounds[i + 1]) for i < count.
  struct Chunks {
    static constexpr int kMax = 512;  // the count stays below this for any n (min_size)
    int count = 0;
    // Only [0, count] is written (by chunks()): not zeroed, since parallel_for makes one of
    // these on its stack every call.
    int64_t bounds[kMax + 1];
  };
  // The chunks of [0, n) for a pool of n_threads: each ceil(left / (2 x n_threads)) long but
  // at least ceil(n / (kMax - 1)), the last one what is left.
  static void chunks(int64_t n, int n_threads, Chunks& out);

 private:
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
