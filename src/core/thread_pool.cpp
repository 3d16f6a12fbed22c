#include "core/thread_pool.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <string>

#include "core/cpu_affinity.h"
#include "core/error.h"

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

// Spins until done() or about kSpin has passed; returns done(). The clock is read every 64
// pauses (a pause costs 10-140 cycles, depending on the core), first after 64 of them: most
// waits end sooner, and a read costs ~40 ns on a virtual machine's clock.
template <typename Done>
bool spin_until(Done done) {
  std::chrono::steady_clock::time_point start;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (i == 64) {
        start = now;
      } else if (now - start > kSpin) {
        return done();
      }
    }
  }
}

// A deck word: (generation << 32) | (front << 16) | back.
inline uint64_t deck_word(uint32_t gen, int front, int back) {
  return (uint64_t{gen} << 32) | (static_cast<uint64_t>(front) << 16) | static_cast<uint64_t>(back);
}
inline uint32_t generation_of(uint64_t word) {
  return static_cast<uint32_t>(word >> 32);
}
inline int front_of(uint64_t word) {
  return static_cast<int>((word >> 16) & 0xffff);
}
inline int back_of(uint64_t word) {
  return static_cast<int>(word & 0xffff);
}

thread_local const ThreadPool* tls_running_pool = nullptr;

}  // namespace

ThreadPool::ThreadPool(int n_threads, std::vector<int> cpus) : cpus_(std::move(cpus)) {
  static std::atomic<uint64_t> pools{0};
  id_ = ++pools;
  n_threads_ = std::max(1, kernel_thread_count(n_threads, cpus_));
  if (!cpus_.empty() && cpus_.size() < static_cast<size_t>(n_threads_)) {
    throw Error("--affinity names " + std::to_string(cpus_.size()) + " CPU" +
                (cpus_.size() == 1 ? "" : "s") + " for " + std::to_string(n_threads_) +
                " kernel threads: pinning takes one CPU a thread");
  }
  decks_ = std::make_unique<Deck[]>(static_cast<size_t>(n_threads_));
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  if (cpus_.empty()) return;
  try {
    for (int i = 1; i < n_threads_; ++i) {
      pin_thread(cpus_[static_cast<size_t>(i)],
                 workers_[static_cast<size_t>(i - 1)].native_handle());
    }
  } catch (...) {
    stop_workers();  // no destructor runs for a constructor that throws
    throw;
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_.store(true, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

ThreadPool::~ThreadPool() {
  stop_workers();
}

int ThreadPool::claim(int d, uint32_t gen, bool from_front) {
  std::atomic<uint64_t>& word = decks_[static_cast<size_t>(d)].word;
  uint64_t w = word.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(w) != gen) return -1;  // that dispatch is over
    const int front = front_of(w);
    const int back = back_of(w);
    if (front >= back) return -1;
    const uint64_t next =
        from_front ? deck_word(gen, front + 1, back) : deck_word(gen, front, back - 1);
    if (word.compare_exchange_weak(w, next, std::memory_order_acq_rel)) {
      return from_front ? front : back - 1;
    }
  }
}

void ThreadPool::work_on(uint32_t gen, int self) {
  const int n_decks = n_threads_;  // decks past the chunking's count are empty
  int ran = 0;
  for (int k = 0; k < n_decks; ++k) {
    const int d = (self + k) % n_decks;
    for (int index; (index = claim(d, gen, /*from_front=*/k == 0)) >= 0;) {
      // Chunk `index` of dispatch `gen` is ours; the dispatch cannot end before we report it.
      try {
        (*task_)(index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      ++ran;
    }
  }
  if (ran == 0) return;
  // Sequentially consistent with the caller's sleeping flag (a store-load handshake).
  if (done_.fetch_add(ran) + ran == n_chunks_.load(std::memory_order_relaxed) &&
      caller_sleeping_.load()) {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_cv_.notify_one();
  }
}

void ThreadPool::worker_loop(int self) {
  tls_running_pool = this;
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = seen;
    spin_until([&] {
      gen = generation_.load(std::memory_order_acquire);
      return gen != seen;
    });
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      // Sequentially consistent with dispatch's store of the generation and load of
      // sleepers_: either it sees this thread counted (and notifies, under the lock, so not
      // before the wait below has begun) or this thread sees the new generation.
      sleepers_.fetch_add(1);
      wake_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = gen;
    work_on(gen, self);
  }
}

void ThreadPool::dispatch(const Chunks& c, const std::function<void(int)>& chunk_fn) {
  assert(tls_running_pool != this && "a task must not call back into its own pool");
  std::lock_guard<std::mutex> lock(dispatch_mu_);
  task_ = &chunk_fn;
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  n_chunks_.store(c.count, std::memory_order_relaxed);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  for (int d = 0; d < n_threads_; ++d) {
    const uint64_t w =
        d < c.n_decks ? deck_word(gen, c.deck_begin[d], c.deck_begin[d + 1]) : deck_word(gen, 0, 0);
    decks_[static_cast<size_t>(d)].word.store(w, std::memory_order_relaxed);
  }
  generation_.store(gen);
  if (sleepers_.load() > 0) {
    // Taking the lock waits for a worker between counting itself and waiting.
    { const std::lock_guard<std::mutex> wake(wake_mu_); }
    wake_cv_.notify_all();
  }

  tls_running_pool = this;
  work_on(gen, 0);
  tls_running_pool = nullptr;

  // Every chunk is claimed; wait for those still running on workers. Once all have run, every
  // deck is empty, so a late worker of this generation finds nothing to claim, and one of
  // the next dispatch's generation cannot be confused with this one's.
  if (!spin_until([&] { return done_.load() == c.count; })) {
    std::unique_lock<std::mutex> wait(done_mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(wait, [&] { return done_.load() == c.count; });
    caller_sleeping_.store(false);
  }
  task_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ThreadPool::chunks(int64_t n, int n_threads, Chunks& out) {
  assert(n >= 0 && n_threads >= 1);
  constexpr int64_t kDivisor = 4;
  const int decks = static_cast<int>(
      std::min<int64_t>({int64_t{n_threads}, std::max<int64_t>(n, 1), int64_t{Chunks::kMaxDecks}}));
  const int64_t per_deck = Chunks::kMax / decks;  // chunks a deck may have
  out.count = 0;
  out.n_decks = decks;
  out.bounds[0] = 0;
  for (int d = 0; d < decks; ++d) {
    out.deck_begin[d] = out.count;
    const int64_t length = n / decks + (d < n % decks ? 1 : 0);
    const int64_t min_size = std::max<int64_t>(1, (length + per_deck - 2) / (per_deck - 1));
    for (int64_t left = length; left > 0;) {
      const int64_t size = std::min(left, std::max(min_size, (left + kDivisor - 1) / kDivisor));
      out.bounds[out.count + 1] = out.bounds[out.count] + size;
      ++out.count;
      left -= size;
    }
  }
  out.deck_begin[decks] = out.count;
  assert(out.count <= Chunks::kMax && out.bounds[out.count] == n);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // The caller is thread 0: pinned to its CPU the first time it calls (a pool is called from
  // one thread at a time, the engine's or the CLI's, for its whole life).
  thread_local uint64_t pinned_for = 0;  // the pool (its id) this thread was pinned for
  if (!cpus_.empty() && pinned_for != id_) {
    pin_thread(cpus_[0]);
    pinned_for = id_;
  }
  Chunks c;
  chunks(n, n_threads_, c);
  if (n_threads_ == 1 || c.count == 1) {
    // The same chunks, in order, on the caller.
    for (int i = 0; i < c.count; ++i) fn(c.bounds[i], c.bounds[i + 1]);
    return;
  }
  dispatch(c, [&](int index) { fn(c.bounds[index], c.bounds[index + 1]); });
}

}  // namespace tokamak
