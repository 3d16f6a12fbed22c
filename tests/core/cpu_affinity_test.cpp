#include "core/cpu_affinity.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

namespace tokamak {
namespace {

// The CPUs the calling thread may run on.
std::vector<int> this_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Puts the calling thread's affinity back as it was when the guard was made (a pool pins the
// thread that calls it).
class AffinityGuard {
 public:
  AffinityGuard() { pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_); }
  ~AffinityGuard() { pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_); }

 private:
  cpu_set_t saved_;
};

TEST(CpuAffinityTest, SpecsNameCpusInThreadOrder) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_TRUE(std::is_sorted(allowed.begin(), allowed.end()));
  EXPECT_TRUE(parse_cpu_affinity("none").empty());
  EXPECT_EQ(parse_cpu_affinity("auto"), allowed);
  const int a = allowed.front();
  EXPECT_EQ(parse_cpu_affinity(std::to_string(a)), std::vector<int>{a});
  if (allowed.size() >= 2) {
    const int b = allowed[1];
    // The order written is the threads' order, a range counts up.
    EXPECT_EQ(parse_cpu_affinity(std::to_string(b) + "," + std::to_string(a)),
              (std::vector<int>{b, a}));
    if (b == a + 1) {
      EXPECT_EQ(parse_cpu_affinity(std::to_string(a) + "-" + std::to_string(b)),
                (std::vector<int>{a, b}));
    }
  }
}

TEST(CpuAffinityTest, BadSpecsAreRejectedWithTheReason) {
  const std::vector<int> allowed = allowed_cpus();
  const std::string a = std::to_string(allowed.front());
  const auto rejects = [](const std::string& spec, const std::string& reason) {
    try {
      parse_cpu_affinity(spec);
      ADD_FAILURE() << "accepted '" << spec << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos)
          << "'" << spec << "': " << e.what();
    }
  };
  const std::vector<std::string> malformed = {"",      "x",           "-",      a + "-", "-" + a,
                                              a + ",", "," + a,       a + ",,", "0x1",   " 0",
                                              "1.5",   "99999999999", "all"};
  for (const std::string& spec : malformed) {
    rejects(spec, "is not none, auto or a CPU list");
  }
  rejects(a + "," + a, "named twice");
  // A CPU past the allowed set (past its last one, so certainly outside it).
  rejects(std::to_string(allowed.back() + 1), "not one this process may run on");
  if (allowed.back() >= 1) rejects(std::to_string(allowed.back()) + "-0", "runs backwards");
}

// Each thread of a pinned pool runs on its CPU alone: the workers from the start, the caller
// from its first parallel_for; the pool's work is unchanged.
TEST(CpuAffinityTest, APinnedPoolRunsEachThreadOnItsCpu) {
  const AffinityGuard guard;
  std::vector<int> cpus = allowed_cpus();
  const int n = std::min<int>(2, static_cast<int>(cpus.size()));
  cpus.resize(static_cast<size_t>(n));
  std::reverse(cpus.begin(), cpus.end());  // not the OS's order
  ThreadPool pool(n, cpus);
  EXPECT_EQ(pool.n_threads(), n);
  std::mutex mu;
  std::set<std::vector<int>> seen;
  std::vector<int> visits(64, 0);
  for (int rep = 0; rep < 2000 && seen.size() < static_cast<size_t>(n); ++rep) {
    pool.parallel_for(64, [&](int64_t b, int64_t e) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const std::vector<int> mine = this_thread_cpus();
      std::lock_guard<std::mutex> lock(mu);
      seen.insert(mine);
      for (int64_t i = b; i < e; ++i) ++visits[static_cast<size_t>(i)];
    });
  }
  for (const std::vector<int>& s : seen) {
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NE(std::find(cpus.begin(), cpus.end(), s[0]), cpus.end()) << s[0];
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_EQ(this_thread_cpus(), std::vector<int>{cpus[0]});
  const int reps = visits[0];
  EXPECT_TRUE(std::all_of(visits.begin(), visits.end(), [&](int v) { return v == reps; }));
}

// -t as given, else one thread per CPU of the list, else per CPU the process may run on: what
// the pool runs and what the start-up lines and JSON report.
TEST(CpuAffinityTest, ThreadCountFollowsTheRequestThenTheList) {
  const std::vector<int> allowed = allowed_cpus();
  EXPECT_EQ(kernel_thread_count(3, {}), 3);
  EXPECT_EQ(kernel_thread_count(3, {allowed.front()}), 3);
  EXPECT_EQ(kernel_thread_count(0, {allowed.front()}), 1);
  EXPECT_EQ(kernel_thread_count(0, {}), static_cast<int>(allowed.size()));
  const AffinityGuard guard;
  EXPECT_EQ(ThreadPool(0, {allowed.front()}).n_threads(),
            kernel_thread_count(0, {allowed.front()}));
  EXPECT_EQ(ThreadPool(0).n_threads(), kernel_thread_count(0, {}));
}

TEST(CpuAffinityTest, APoolNeedsACpuAThread) {
  const int cpu = allowed_cpus().front();
  EXPECT_THROW(ThreadPool(2, {cpu}), Error);
  // Zero threads with a list: one a CPU.
  const AffinityGuard guard;
  ThreadPool one(0, {cpu});
  EXPECT_EQ(one.n_threads(), 1);
}

}  // namespace
}  // namespace tokamak
