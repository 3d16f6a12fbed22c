#include "core/thread_pool.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tokamak {
namespace {

// How long an idle thread spins before it sleeps. Long enough to bridge the serial work
// between two kernels (encoding a matmul's input, ~10-15 us at concurrency 32) and most gaps
// between engine steps: the 2,048 pauses spun before (23 us on the Intel AMX guest, where a
// pause is ~40 cycles, 80 us where it is 140) let the worker sleep ~43 times a
// concurrency-32 decode step of the default model and the caller ~14, each wake a futex
// call and, on a virtual machine, an interrupt to a halted vCPU. Short enough not to burn a
// shared core for long once the work stops.
constexpr auto kSpin = std::chrono::microseconds(250);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until done() or kSpin has passed; returns done(). The clock is read every 64 pauses
// (a pause costs 10-140 cycles, depending on the core).
template <typename Done>
bool spin_until(Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return done();
  }
}

inline uint32_t generation_of(uint64_t state) {
  return static_cast<uint32_t>(state >> 32);
}

thread_local const ThreadPool* tls_running_pool = nullptr;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (n_threads <= 0) n_threads = 1;
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_.store(true, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on(uint32_t gen) {
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    if (generation_of(s) != gen) return;  // that dispatch is over
    const uint32_t index = static_cast<uint32_t>(s);
    if (index >= static_cast<uint32_t>(n_chunks_.load(std::memory_order_relaxed))) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    // Chunk `index` of dispatch `gen` is ours; the dispatch cannot end before we report it.
    try {
      (*task_)(static_cast<int>(index));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    // Sequentially consistent with the caller's sleeping flag (a store-load handshake).
    if (done_.fetch_add(1) + 1 == n_chunks_.load(std::memory_order_relaxed) &&
        caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::worker_loop() {
  tls_running_pool = this;
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = seen;
    spin_until([&] {
      gen = generation_of(state_.load(std::memory_order_acquire));
      return gen != seen;
    });
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait(lock, [&] {
        return stop_.load(std::memory_order_acquire) ||
               generation_of(state_.load(std::memory_order_acquire)) != seen;
      });
      gen = generation_of(state_.load(std::memory_order_acquire));
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = gen;
    work_on(gen);
  }
}

void ThreadPool::dispatch(int n_chunks, const std::function<void(int)>& chunk_fn) {
  assert(tls_running_pool != this && "a task must not call back into its own pool");
  std::lock_guard<std::mutex> lock(dispatch_mu_);
  task_ = &chunk_fn;
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  n_chunks_.store(n_chunks, std::memory_order_relaxed);
  const uint32_t gen = generation_of(state_.load(std::memory_order_relaxed)) + 1;
  {
    // Under the lock so that a worker about to sleep cannot miss the new generation.
    std::lock_guard<std::mutex> wake(wake_mu_);
    state_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  }
  wake_cv_.notify_all();

  tls_running_pool = this;
  work_on(gen);
  tls_running_pool = nullptr;

  // Every chunk is claimed; wait for those still running on workers.
  if (!spin_until([&] { return done_.load() == n_chunks; })) {
    std::unique_lock<std::mutex> wait(done_mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(wait, [&] { return done_.load() == n_chunks; });
    caller_sleeping_.store(false);
  }
  // Close the dispatch: late workers see a finished generation and claim nothing.
  state_.store((static_cast<uint64_t>(gen) << 32) | 0xffffffffu, std::memory_order_release);
  task_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ThreadPool::chunks(int64_t n, int n_threads, Chunks& out) {
  assert(n >= 0 && n_threads >= 1);
  const int64_t divisor = 2 * int64_t{n_threads};
  const int64_t min_size = std::max<int64_t>(1, (n + Chunks::kMax - 2) / (Chunks::kMax - 1));
  out.count = 0;
  out.bounds[0] = 0;
  for (int64_t left = n; left > 0;) {
    const int64_t size = std::min(left, std::max(min_size, (left + divisor - 1) / divisor));
    out.bounds[out.count + 1] = out.bounds[out.count] + size;
    ++out.count;
    left -= size;
  }
  assert(out.count <= Chunks::kMax && out.bounds[out.count] == n);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  Chunks c;
  chunks(n, n_threads_, c);
  if (n_threads_ == 1 || c.count == 1) {
    // The same chunks, in order, on the caller.
    for (int i = 0; i < c.count; ++i) fn(c.bounds[i], c.bounds[i + 1]);
    return;
  }
  dispatch(c.count, [&](int index) { fn(c.bounds[index], c.bounds[index + 1]); });
}

}  // namespace tokamak
