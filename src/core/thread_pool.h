#pragma once
// A persistent pool of kernel threads, created once; the calling thread takes part.
//
// parallel_for(n, fn) cuts [0, n) into a fixed set of contiguous chunks that depends only on
// n and the pool size (chunks() below), and every chunk is run exactly once as
// fn(begin, end). Which thread runs a chunk may vary; what is computed never does, as long as
// fn computes each element from its index alone (every kernel here keeps a fixed reduction
// order per output element), so results never depend on scheduling or on the thread count.
//
// The chunks come in decks, one a thread: deck t is the t-th of n_threads near-equal
// contiguous parts of the range, and its chunks shrink towards its end (each a quarter of what
// is left of the deck, down to one index). Thread t takes its own deck's chunks from the
// front; a thread whose deck is empty takes the others' from the back, where they are
// smallest. So the threads finish close together whatever each chunk costs, a thread that
// the OS has not scheduled yet does not hold the others up (the caller may end up running
// every chunk itself), and while every thread is busy on its own deck, no claim touches a
// cache line that another core writes. Claims from one shared counter, as before, cost ~2 us
// a dispatch on two cores (a contended line bouncing twice a chunk), ~150 dispatches a decode
// token; equal chunks, four a thread, before that left the two threads of a concurrency-32
// decode step finishing a matmul 14 us apart on average.
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
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tokamak {

class ThreadPool {
 public:
  // n_threads >= 1 threads in all (n_threads - 1 workers plus the caller); 0 means one per
  // CPU this process may run on (core/cpu_affinity.h), or per CPU of `cpus` when given.
  // With `cpus` (core/cpu_affinity.h's parse_cpu_affinity), thread i is pinned to cpus[i]:
  // worker i at its start, the caller (thread 0) at its first parallel_for. Throws Error when
  // cpus names fewer CPUs than threads, or when the OS refuses a pinning.
  explicit ThreadPool(int n_threads = 0, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end) once for each chunk of [0, n) (see above); returns when all are
  // done. An exception thrown by fn is rethrown here (the first one).
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

  // The chunking of parallel_for: chunk i is [bounds[i], bounds[i + 1]) for i < count, and
  // deck d is chunks [deck_begin[d], deck_begin[d + 1]) for d < n_decks.
  struct Chunks {
    static constexpr int kMax = 1024;     // the count stays within this for any n
    static constexpr int kMaxDecks = 64;  // threads past this many only take others' chunks
    int count = 0;
    int n_decks = 0;
    // Only what chunks() writes is set: not zeroed, since parallel_for makes one of these on
    // its stack every call.
    int64_t bounds[kMax + 1];
    int deck_begin[kMaxDecks + 1];
  };
  // The chunks of [0, n) for a pool of n_threads: min(n_threads, n, kMaxDecks) decks of
  // near-equal length (the first n % decks one index longer), each cut into chunks of
  // ceil(left / 4) of what is left of it but at least ceil(length / (kMax / decks - 1)).
  static void chunks(int64_t n, int n_threads, Chunks& out);

 private:
  // A deck's unclaimed chunks [front, back) in the current dispatch, tagged with the
  // dispatch's generation so that a thread still on an earlier one cannot claim them. Its
  // own cache line: only the owner writes it until a thief comes.
  struct alignas(64) Deck {
    std::atomic<uint64_t> word{0};  // (generation << 32) | (front << 16) | back
  };

  // Runs chunks of dispatch `gen`, its own deck's from the front, then the other decks' from
  // the back, until none is left unclaimed; adds how many it ran to done_.
  void work_on(uint32_t gen, int self);
  // The next chunk of deck d (from the front or the back), or -1 when it has none left in
  // dispatch gen.
  int claim(int d, uint32_t gen, bool from_front);
  void dispatch(const Chunks& c, const std::function<void(int)>& chunk_fn);
  void worker_loop(int self);
  void stop_workers();  // wakes every worker to exit and joins it

  int n_threads_;
  std::vector<int> cpus_;  // thread i's CPU; empty: not pinned
  uint64_t id_ = 0;        // unique among the process's pools (never reused, unlike `this`)
  std::vector<std::thread> workers_;
  std::unique_ptr<Deck[]> decks_;  // one a thread
  std::mutex dispatch_mu_;         // one dispatch at a time
  // The current dispatch: task_ and n_chunks_ are set, and the decks filled, before
  // generation_ publishes it.
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<int> n_chunks_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> done_{0};  // chunks finished in the current dispatch
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers waiting on wake_cv_ (or about to)
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace tokamak
