#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace tokamak {
namespace {

constexpr int32_t kBs = 4;

// Blocks from the root to `node`.
int32_t depth(const PrefixNode* node) {
  int32_t d = 0;
  for (; node->parent != nullptr; node = node->parent) ++d;
  return d;
}

std::vector<int32_t> seq(int32_t first, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Inserts the full blocks of `tokens` (fresh pool blocks where the cache has none) as a
// sequence would, and returns the deepest node, locked. The sequence's own references are
// dropped at once, as if it had finished, except for the lock (unlock it to finish it).
PrefixNode* cache_tokens(PrefixCache& cache, BlockPool& pool, const std::vector<int32_t>& tokens) {
  PrefixNode* node = cache.root();
  for (size_t i = 0; (i + 1) * kBs <= tokens.size(); ++i) {
    const int32_t own = *pool.allocate();
    node = cache.insert(node, std::span(tokens).subspan(i * kBs, kBs), own);
    pool.release(own);  // the cache keeps its reference if it took the block
  }
  cache.lock(node);
  return node;
}

TEST(PrefixCache, MatchesLongestFullBlockPrefix) {
  BlockPool pool(16);
  PrefixCache cache(pool, kBs);
  PrefixNode* a = cache_tokens(cache, pool, seq(0, 10));  // 2 full blocks, 2 tokens left out
  EXPECT_EQ(cache.n_cached(), 2);
  EXPECT_EQ(cache.n_evictable(), 0);
  EXPECT_EQ(pool.n_used(), 2);

  std::vector<int32_t> blocks;
  auto t = seq(0, 12);
  PrefixNode* m = cache.match(t, 100, blocks);
  EXPECT_EQ(m, a);
  EXPECT_EQ(blocks.size(), 2u);
  EXPECT_EQ(cache.peek(t), 2);

  // A different third token in block 1: only block 0 matches.
  t[5] = 99;
  EXPECT_EQ(cache.peek(t), 1);
  // Fewer tokens than a block: nothing.
  EXPECT_EQ(cache.peek(seq(0, 3)), 0);
  // max_blocks caps the match.
  blocks.clear();
  PrefixNode* one = cache.match(seq(0, 12), 1, blocks);
  EXPECT_EQ(blocks.size(), 1u);
  EXPECT_EQ(depth(one), 1);
  cache.unlock(one);
  cache.unlock(m);
  cache.unlock(a);
  EXPECT_EQ(cache.n_evictable(), 2);
  cache.clear();
  EXPECT_EQ(cache.n_cached(), 0);
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, CollidingHashesStillCompareTokens) {
  // Same tokens in another order: another block, never a match.
  BlockPool pool(8);
  PrefixCache cache(pool, kBs);
  cache.unlock(cache_tokens(cache, pool, {1, 2, 3, 4}));
  EXPECT_EQ(cache.peek(std::vector<int32_t>{4, 3, 2, 1}), 0);
  EXPECT_EQ(cache.peek(std::vector<int32_t>{1, 2, 3, 4}), 1);
}

TEST(PrefixCache, LocksProtectThePathToTheRoot) {
  BlockPool pool(16);
  PrefixCache cache(pool, kBs);
  // Shared first block, then two branches.
  PrefixNode* a = cache_tokens(cache, pool, {1, 1, 1, 1, 2, 2, 2, 2});
  PrefixNode* b = cache_tokens(cache, pool, {1, 1, 1, 1, 3, 3, 3, 3});
  EXPECT_EQ(cache.n_cached(), 3);
  EXPECT_EQ(cache.n_evictable(), 0);
  cache.unlock(a);
  EXPECT_EQ(cache.n_evictable(), 1) << "a's leaf only; the shared root block is b's too";
  EXPECT_TRUE(cache.evictable(a->block));
  EXPECT_FALSE(cache.evictable(a->parent->block));
  EXPECT_EQ(cache.evict(5), 1);
  EXPECT_EQ(cache.n_cached(), 2);
  EXPECT_EQ(pool.n_used(), 2);
  cache.unlock(b);
  EXPECT_EQ(cache.n_evictable(), 2);
  EXPECT_EQ(cache.evict(5), 2) << "b's leaf, then the root block it uncovered";
  EXPECT_EQ(pool.n_used(), 0);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesFirst) {
  BlockPool pool(16);
  PrefixCache cache(pool, kBs);
  cache.unlock(cache_tokens(cache, pool, {1, 1, 1, 1}));
  cache.unlock(cache_tokens(cache, pool, {2, 2, 2, 2}));
  cache.unlock(cache_tokens(cache, pool, {3, 3, 3, 3}));
  // Using 1 makes 2 the oldest.
  std::vector<int32_t> blocks;
  cache.unlock(cache.match(std::vector<int32_t>{1, 1, 1, 1}, 1, blocks));
  EXPECT_EQ(cache.evict(1), 1);
  EXPECT_EQ(cache.peek(std::vector<int32_t>{2, 2, 2, 2}), 0);
  EXPECT_EQ(cache.peek(std::vector<int32_t>{1, 1, 1, 1}), 1);
  EXPECT_EQ(cache.peek(std::vector<int32_t>{3, 3, 3, 3}), 1);
  EXPECT_EQ(cache.evict(1), 1);
  EXPECT_EQ(cache.peek(std::vector<int32_t>{3, 3, 3, 3}), 0);
}

TEST(PrefixCache, InsertFindsTheCachedBlockInsteadOfADuplicate) {
  BlockPool pool(8);
  PrefixCache cache(pool, kBs);
  PrefixNode* a = cache_tokens(cache, pool, {5, 5, 5, 5});
  const int32_t other = *pool.allocate();
  PrefixNode* again = cache.insert(cache.root(), std::vector<int32_t>{5, 5, 5, 5}, other);
  EXPECT_EQ(again, a);
  EXPECT_NE(again->block, other);
  EXPECT_EQ(pool.ref_count(other), 1) << "not taken by the cache";
  pool.release(other);
  cache.unlock(a);
}

TEST(PrefixCache, RandomOperationsKeepCountsAndReferences) {
  // Random inserts, matches, unlocks and evictions over a small alphabet (many shared
  // prefixes); after each, the counts agree with a recount, and when every lock is gone and
  // the cache is cleared the pool is all free.
  BlockPool pool(64);
  std::mt19937 rng(3);
  {
    PrefixCache cache(pool, kBs);
    std::vector<PrefixNode*> held;
    for (int op = 0; op < 3000; ++op) {
      const int kind = static_cast<int>(rng() % 4);
      if (kind == 0 && pool.n_free() >= 4) {
        std::vector<int32_t> t(static_cast<size_t>(kBs * (1 + rng() % 4)));
        for (auto& x : t) x = static_cast<int32_t>(rng() % 2);
        held.push_back(cache_tokens(cache, pool, t));
      } else if (kind == 1) {
        std::vector<int32_t> t(static_cast<size_t>(kBs * 3));
        for (auto& x : t) x = static_cast<int32_t>(rng() % 2);
        std::vector<int32_t> blocks;
        held.push_back(cache.match(t, 3, blocks));
        EXPECT_EQ(static_cast<int32_t>(blocks.size()), depth(held.back()));
      } else if (kind == 2 && !held.empty()) {
        const size_t i = rng() % held.size();
        cache.unlock(held[i]);
        held.erase(held.begin() + static_cast<long>(i));
      } else {
        const int32_t before = cache.n_cached();
        const int32_t freed = cache.evict(static_cast<int32_t>(rng() % 3));
        EXPECT_EQ(cache.n_cached(), before - freed);
      }
      ASSERT_EQ(pool.n_used(), cache.n_cached()) << "the cache holds the only references";
      int32_t evictable = 0;
      for (int32_t b = 0; b < pool.n_blocks(); ++b) evictable += cache.evictable(b);
      ASSERT_EQ(evictable, cache.n_evictable());
    }
    for (PrefixNode* n : held) cache.unlock(n);
    EXPECT_EQ(cache.n_evictable(), cache.n_cached());
    cache.clear();
    EXPECT_EQ(cache.n_cached(), 0);
  }
  EXPECT_EQ(pool.n_used(), 0);
}

}  // namespace
}  // namespace tokamak
