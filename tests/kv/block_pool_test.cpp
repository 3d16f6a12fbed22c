#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace tokamak {
namespace {

TEST(BlockPool, StartsAllFree) {
  BlockPool pool(5);
  EXPECT_EQ(pool.n_blocks(), 5);
  EXPECT_EQ(pool.n_free(), 5);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.peak_used(), 0);
  for (int32_t b = 0; b < 5; ++b) EXPECT_EQ(pool.ref_count(b), 0);
}

TEST(BlockPool, AllocatesLowestIdFirst) {
  BlockPool pool(4);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  pool.release(1);
  pool.release(0);
  // Freed out of order, handed back lowest first.
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.ref_count(0), 1);
}

TEST(BlockPool, ExhaustionReturnsNullopt) {
  BlockPool pool(2);
  ASSERT_TRUE(pool.allocate().has_value());
  ASSERT_TRUE(pool.allocate().has_value());
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.n_free(), 0);
  pool.release(1);
  EXPECT_EQ(pool.allocate(), 1);
}

TEST(BlockPool, AllocateManyIsAllOrNothing) {
  BlockPool pool(5);
  std::vector<int32_t> out = {42};  // appended to, never cleared
  ASSERT_TRUE(pool.allocate(3, out));
  EXPECT_EQ(out, (std::vector<int32_t>{42, 0, 1, 2}));
  EXPECT_FALSE(pool.allocate(3, out));  // only 2 free
  EXPECT_EQ(out.size(), 4u);
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_EQ(pool.ref_count(3), 0);
  EXPECT_TRUE(pool.allocate(0, out));
  EXPECT_EQ(out.size(), 4u);
  ASSERT_TRUE(pool.allocate(2, out));
  EXPECT_EQ(out, (std::vector<int32_t>{42, 0, 1, 2, 3, 4}));
  EXPECT_EQ(pool.n_free(), 0);
}

TEST(BlockPool, BlockIsFreedAtLastRelease) {
  BlockPool pool(3);
  int32_t b = *pool.allocate();
  pool.retain(b);
  pool.retain(b);
  EXPECT_EQ(pool.ref_count(b), 3);
  pool.release(b);
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.n_used(), 1);
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b), 0);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.allocate(), b);
}

TEST(BlockPool, ReleaseSpan) {
  BlockPool pool(4);
  std::vector<int32_t> blocks;
  ASSERT_TRUE(pool.allocate(4, blocks));
  pool.retain(2);
  pool.release(blocks);
  EXPECT_EQ(pool.n_free(), 3);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.allocate(), 0);
}

TEST(BlockPool, PeakTracksMostUsedAtOnce) {
  BlockPool pool(8);
  std::vector<int32_t> blocks;
  ASSERT_TRUE(pool.allocate(5, blocks));
  pool.release(std::span<const int32_t>(blocks).subspan(1));
  EXPECT_EQ(pool.n_used(), 1);
  EXPECT_EQ(pool.peak_used(), 5);
  pool.retain(blocks[0]);  // more owners, not more blocks
  EXPECT_EQ(pool.peak_used(), 5);
  pool.reset_peak();
  EXPECT_EQ(pool.peak_used(), 1);
  ASSERT_TRUE(pool.allocate().has_value());
  ASSERT_TRUE(pool.allocate().has_value());
  EXPECT_EQ(pool.peak_used(), 3);
}

// Random allocate / retain / release checked against a plain model: a reference count per
// block, the lowest free id handed out first.
TEST(BlockPool, RandomOperationsMatchModel) {
  constexpr int32_t kBlocks = 37;
  std::mt19937 rng(1234);
  BlockPool pool(kBlocks);
  std::vector<int32_t> model(kBlocks, 0);
  int32_t model_peak = 0;

  auto lowest_free = [&](int32_t n) {
    std::vector<int32_t> ids;
    for (int32_t b = 0; b < kBlocks && int32_t(ids.size()) < n; ++b)
      if (model[b] == 0) ids.push_back(b);
    return ids;
  };
  auto used_ids = [&] {
    std::vector<int32_t> ids;
    for (int32_t b = 0; b < kBlocks; ++b)
      if (model[b] > 0) ids.push_back(b);
    return ids;
  };
  auto n_used = [&] {
    return int32_t(std::count_if(model.begin(), model.end(), [](int32_t c) { return c > 0; }));
  };

  for (int step = 0; step < 20000; ++step) {
    int op = std::uniform_int_distribution<int>(0, 4)(rng);
    std::vector<int32_t> used = used_ids();
    if (op == 0) {
      std::optional<int32_t> got = pool.allocate();
      std::vector<int32_t> want = lowest_free(1);
      if (want.empty()) {
        ASSERT_EQ(got, std::nullopt);
      } else {
        ASSERT_EQ(got, want[0]);
        model[want[0]] = 1;
      }
    } else if (op == 1) {
      int32_t n = std::uniform_int_distribution<int32_t>(0, 6)(rng);
      std::vector<int32_t> got;
      bool ok = pool.allocate(n, got);
      int32_t n_free = kBlocks - n_used();
      ASSERT_EQ(ok, n <= n_free);
      if (ok) {
        std::vector<int32_t> want = lowest_free(n);
        ASSERT_EQ(got, want);
        for (int32_t b : want) model[b] = 1;
      } else {
        ASSERT_TRUE(got.empty());
      }
    } else if (op == 2 && !used.empty()) {
      int32_t b = used[std::uniform_int_distribution<size_t>(0, used.size() - 1)(rng)];
      pool.retain(b);
      ++model[b];
    } else if (!used.empty()) {  // release is likelier, so the pool drains as well as fills
      int32_t b = used[std::uniform_int_distribution<size_t>(0, used.size() - 1)(rng)];
      pool.release(b);
      --model[b];
    }
    model_peak = std::max(model_peak, n_used());
    ASSERT_EQ(pool.n_used(), n_used());
    ASSERT_EQ(pool.n_free(), kBlocks - n_used());
    ASSERT_EQ(pool.peak_used(), model_peak);
    if (step % 97 == 0) {
      for (int32_t b = 0; b < kBlocks; ++b) ASSERT_EQ(pool.ref_count(b), model[b]) << b;
    }
  }
  EXPECT_EQ(model_peak, kBlocks);  // the sequence did reach exhaustion
}

}  // namespace
}  // namespace tokamak
