#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tokamak {
namespace {

// The chunks cover [0, n) in order, in one deck a thread (fewer when n or the deck cap is
// smaller) of near-equal lengths; inside a deck they shrink (never grow) towards its end, the
// first leaves work for a thief and the last is one index where the length allows; the
// count stays within the cap however large n is.
TEST(ThreadPoolTest, ChunksCoverTheRangeAndShrinkInEachDeck) {
  using Chunks = ThreadPool::Chunks;
  for (int threads : {1, 2, 3, 8, 64, 100}) {
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}, int64_t{1000}, int64_t{1001},
                      int64_t{1} << 20, int64_t{1} << 40}) {
      SCOPED_TRACE(testing::Message() << "threads " << threads << ", n " << n);
      Chunks c;
      ThreadPool::chunks(n, threads, c);
      ASSERT_GE(c.count, 1);
      ASSERT_LE(c.count, Chunks::kMax);
      const int64_t decks = std::min<int64_t>({threads, n, Chunks::kMaxDecks});
      ASSERT_EQ(c.n_decks, decks);
      EXPECT_EQ(c.deck_begin[0], 0);
      EXPECT_EQ(c.deck_begin[c.n_decks], c.count);
      EXPECT_EQ(c.bounds[0], 0);
      EXPECT_EQ(c.bounds[c.count], n);
      for (int i = 0; i < c.count; ++i) EXPECT_LT(c.bounds[i], c.bounds[i + 1]);
      for (int d = 0; d < c.n_decks; ++d) {
        const int first = c.deck_begin[d];
        const int end = c.deck_begin[d + 1];
        ASSERT_LT(first, end);
        const int64_t length = c.bounds[end] - c.bounds[first];
        EXPECT_TRUE(length == n / decks || length == n / decks + 1) << "deck " << d;
        for (int i = first + 1; i < end; ++i) {
          EXPECT_LE(c.bounds[i + 1] - c.bounds[i], c.bounds[i] - c.bounds[i - 1]);
        }
        if (length >= 4) {
          EXPECT_LE(c.bounds[first + 1] - c.bounds[first], (length + 3) / 4);
        }
        if (length < Chunks::kMax / decks) {
          EXPECT_EQ(c.bounds[end] - c.bounds[end - 1], 1);
        }
      }
    }
  }
}

TEST(ThreadPoolTest, ParallelForVisitsEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (int64_t n : {1, 2, 3, 5, 17, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

// The chunks depend only on n and the pool size, and each runs exactly once.
TEST(ThreadPoolTest, ChunksAreFixedAndRunOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 12, 13, 100, 1000}) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> first;
    for (int rep = 0; rep < 10; ++rep) {
      std::vector<std::pair<int64_t, int64_t>> seen;
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace_back(b, e);
      });
      std::sort(seen.begin(), seen.end());
      ThreadPool::Chunks c;
      ThreadPool::chunks(n, pool.n_threads(), c);
      ASSERT_EQ(static_cast<int>(seen.size()), c.count);
      for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i], std::make_pair(c.bounds[i], c.bounds[i + 1]));
      }
      if (rep == 0) first = seen;
      EXPECT_EQ(seen, first);
    }
  }
}

// A one-thread pool runs the same chunks, in order, on the caller.
TEST(ThreadPoolTest, OneThreadRunsTheChunksInOrder) {
  ThreadPool pool(1);
  std::vector<std::pair<int64_t, int64_t>> seen;
  pool.parallel_for(100, [&](int64_t b, int64_t e) { seen.emplace_back(b, e); });
  ThreadPool::Chunks c;
  ThreadPool::chunks(100, 1, c);
  ASSERT_EQ(static_cast<int>(seen.size()), c.count);
  for (int i = 0; i < c.count; ++i)
    EXPECT_EQ(seen[i], std::make_pair(c.bounds[i], c.bounds[i + 1]));
}

// Several threads take part when there is work for them.
TEST(ThreadPoolTest, WorkersTakePart) {
  ThreadPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  for (int rep = 0; rep < 2000 && ids.size() < 2; ++rep) {
    pool.parallel_for(8, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPoolTest, ManyQuickDispatchesAndSleepingWorkers) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 5000; ++rep) {
    pool.parallel_for(10, [&](int64_t b, int64_t e) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 50000);
  // Let the workers fall asleep, then wake them.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.parallel_for(9, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 50009);
}

TEST(ThreadPoolTest, ExceptionIsRethrownToTheCaller) {
  ThreadPool pool(2);
  for (int64_t bad : {0, 5, 7}) {
    EXPECT_THROW(pool.parallel_for(8,
                                   [&](int64_t b, int64_t e) {
                                     if (b <= bad && bad < e) throw std::runtime_error("failed");
                                   }),
                 std::runtime_error);
  }
  // The pool is still usable.
  std::atomic<int64_t> n{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) { n += e - b; });
  EXPECT_EQ(n.load(), 100);
}

// A thread held up inside its first chunk does not hold up its deck: the other thread takes
// the rest of the chunks, its own and the held thread's, from the back.
TEST(ThreadPoolTest, ChunksOfAHeldUpThreadAreTakenByTheOthers) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 20; ++rep) {
    constexpr int64_t kN = 40;
    ThreadPool::Chunks c;
    ThreadPool::chunks(kN, pool.n_threads(), c);
    std::atomic<int> started{0};
    std::atomic<int> others_done{0};
    bool held_up_alone = false;
    pool.parallel_for(kN, [&](int64_t, int64_t) {
      if (started.fetch_add(1) == 0) {
        // The first chunk to start waits (up to 10 s) until every other chunk has run.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (others_done.load() < c.count - 1) {
          if (std::chrono::steady_clock::now() > deadline) {
            held_up_alone = true;
            return;
          }
          std::this_thread::yield();
        }
      } else {
        others_done.fetch_add(1);
      }
    });
    ASSERT_FALSE(held_up_alone) << "the held thread's deck was not taken over";
    EXPECT_EQ(others_done.load(), c.count - 1);
  }
}

TEST(ThreadPoolTest, ZeroMeansHardwareThreads) {
  ThreadPool pool(0);
  EXPECT_GE(pool.n_threads(), 1);
}

}  // namespace
}  // namespace tokamak
