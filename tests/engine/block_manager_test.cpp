// BlockManager with no model: how many blocks a sequence's next tokens need, how many tokens
// the free blocks hold, swapping a sequence's K/V to host memory and back (data intact, host
// bytes accounted and given back), and the host limit; with a hot window, which entries have
// hot copies, and that forks and swaps keep them.

#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/sequence.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {
namespace {

KVCacheShape shape() {
  KVCacheShape s;
  s.n_layer = 2;
  s.n_head_kv = 1;
  s.head_dim_k = 4;
  s.head_dim_v = 4;
  s.block_size = 4;
  return s;
}

Sequence make_seq(int32_t n_tokens) {
  Sequence s;
  s.tokens.assign(size_t(n_tokens), 3);
  s.n_prompt = n_tokens;
  return s;
}

// Writes, for every layer, K and V values that name token t of the sequence.
void write_tokens(PagedKVCache& kv, const Sequence& s, int32_t n) {
  const int32_t bs = kv.block_size();
  for (int32_t l = 0; l < kv.shape().n_layer; ++l) {
    const PagedKVView view = kv.layer(l);
    for (int32_t t = 0; t < n; ++t) {
      const int32_t b = s.block_table[size_t(t / bs)];
      auto* k = reinterpret_cast<uint16_t*>(view.k_tile(b, 0)) + (t % bs) * 4;
      auto* v = reinterpret_cast<uint16_t*>(view.v_tile(b, 0)) + (t % bs) * 4;
      for (int d = 0; d < 4; ++d) {
        k[d] = uint16_t(l * 1000 + t * 10 + d);
        v[d] = uint16_t(20000 + l * 1000 + t * 10 + d);
      }
    }
  }
}

void expect_tokens(const PagedKVCache& kv, const Sequence& s, int32_t n) {
  const int32_t bs = kv.block_size();
  for (int32_t l = 0; l < kv.shape().n_layer; ++l) {
    const PagedKVView view = kv.layer(l);
    for (int32_t t = 0; t < n; ++t) {
      const int32_t b = s.block_table[size_t(t / bs)];
      const auto* k = reinterpret_cast<const uint16_t*>(view.k_tile(b, 0)) + (t % bs) * 4;
      const auto* v = reinterpret_cast<const uint16_t*>(view.v_tile(b, 0)) + (t % bs) * 4;
      for (int d = 0; d < 4; ++d) {
        ASSERT_EQ(k[d], uint16_t(l * 1000 + t * 10 + d)) << "layer " << l << " token " << t;
        ASSERT_EQ(v[d], uint16_t(20000 + l * 1000 + t * 10 + d)) << "layer " << l << " token " << t;
      }
    }
  }
}

TEST(BlockManagerTest, BlocksNeededAndTokensThatFit) {
  PagedKVCache kv(shape(), 5);
  BlockManager bm(kv);
  Sequence s = make_seq(20);
  EXPECT_EQ(bm.blocks_needed(s, 1), 1);
  EXPECT_EQ(bm.blocks_needed(s, 4), 1);
  EXPECT_EQ(bm.blocks_needed(s, 5), 2);
  EXPECT_EQ(bm.tokens_that_fit(s, 100), 20);
  EXPECT_EQ(bm.tokens_that_fit(s, 7), 7);
  bm.allocate(s, 3);
  s.n_computed = 3;
  EXPECT_EQ(bm.n_available(), 4);
  EXPECT_EQ(bm.blocks_needed(s, 1), 0) << "token 3 goes into the block it has";
  EXPECT_EQ(bm.blocks_needed(s, 2), 1);
  EXPECT_EQ(bm.tokens_that_fit(s, 100), 1 + 4 * 4);
  EXPECT_FALSE(bm.can_allocate(s, 18));
  EXPECT_TRUE(bm.can_allocate(s, 17));
  bm.free(s);
  EXPECT_EQ(bm.n_available(), 5);
  EXPECT_TRUE(s.block_table.empty());
}

TEST(BlockManagerTest, SwapOutAndBackInKeepsTheKV) {
  PagedKVCache kv(shape(), 8);
  BlockManager bm(kv);
  Sequence s = make_seq(11);
  bm.allocate(s, 10);
  s.n_computed = 10;
  write_tokens(kv, s, 10);
  Sequence other = make_seq(4);  // takes a block so that s comes back into other ids
  ASSERT_TRUE(bm.swap_out(s, size_t{1} << 30));
  EXPECT_TRUE(s.swapped());
  EXPECT_EQ(s.n_swapped_blocks, 3);
  EXPECT_TRUE(s.block_table.empty());
  EXPECT_EQ(s.n_computed, 10);
  EXPECT_EQ(bm.n_available(), 8);
  EXPECT_EQ(bm.swapped_bytes(), 3 * kv.shape().bytes_per_block());
  bm.allocate(other, 4);
  EXPECT_EQ(bm.blocks_needed(s, 1), 3) << "its 3 blocks back; token 10 fits the third";
  EXPECT_EQ(bm.blocks_needed(s, 3), 4);
  bm.allocate(s, 1);
  EXPECT_FALSE(s.swapped());
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(bm.swapped_bytes(), 0u);
  expect_tokens(kv, s, 10);
  bm.free(s);
  bm.free(other);
  EXPECT_EQ(bm.n_available(), 8);
}

TEST(BlockManagerTest, SwapOutBeyondTheHostLimitDoesNothing) {
  PagedKVCache kv(shape(), 8);
  BlockManager bm(kv);
  const size_t block = kv.shape().bytes_per_block();
  Sequence a = make_seq(8);
  bm.allocate(a, 8);
  a.n_computed = 8;
  Sequence b = make_seq(8);
  bm.allocate(b, 8);
  b.n_computed = 8;
  ASSERT_TRUE(bm.swap_out(a, 3 * block));
  EXPECT_FALSE(bm.swap_out(b, 3 * block)) << "2 + 2 blocks exceed a limit of 3";
  EXPECT_FALSE(b.swapped());
  EXPECT_EQ(b.block_table.size(), 2u);
  EXPECT_EQ(bm.n_available(), 6);
  bm.drop_swapped(a);
  EXPECT_EQ(bm.swapped_bytes(), 0u);
  EXPECT_FALSE(a.swapped());
  EXPECT_TRUE(bm.swap_out(b, 3 * block)) << "the dropped space is free again";
  bm.free(b);  // a swapped sequence that finishes
  EXPECT_EQ(bm.swapped_bytes(), 0u);
  EXPECT_EQ(bm.n_available(), 8);
}

}  // namespace
}  // namespace tokamak

namespace tokamak {
namespace {

// With tiers, swap preemption takes the prefix cache's path: full blocks stay cached in the
// pool (evictable), and only the partly filled last block is copied to host memory, charged
// to the host tier's budget (--swap-space is not used). Cached entries make room for
// swapped bytes, never the other way round.
TEST(BlockManagerTest, SwapWithTiersCopiesOnlyThePartialBlock) {
  PagedKVCache kv(shape(), 8);
  const size_t block = kv.shape().bytes_per_block();
  KVTierOptions tiers;
  tiers.host_bytes = 2 * block;
  BlockManager bm(kv, /*prefix_caching=*/true, tiers);
  // A cached block that the pool then evicts: it lands in the host tier.
  Sequence c = make_seq(5);
  c.tokens[0] = 9;
  bm.allocate(c, 4);
  c.n_computed = 4;
  bm.cache_full_blocks(c);
  bm.free(c);
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.tiers()->stats().host_entries, 1u);

  Sequence a = make_seq(8);
  a.tokens[0] = 1;  // a, b and d share no block
  bm.allocate(a, 7);
  a.n_computed = 7;
  Sequence b = make_seq(8);
  b.tokens[0] = 2;
  bm.allocate(b, 7);
  b.n_computed = 7;
  Sequence d = make_seq(8);
  d.tokens[0] = 3;
  bm.allocate(d, 7);
  d.n_computed = 7;
  ASSERT_TRUE(bm.swap_out(a, /*host_limit=*/0)) << "the limit is the tier's, not host_limit";
  EXPECT_EQ(a.n_swapped_blocks, 2);
  EXPECT_EQ(a.n_swapped_cached, 1);
  EXPECT_EQ(bm.swapped_bytes(), block) << "only the partial block is copied";
  EXPECT_EQ(bm.prefix_cache()->n_evictable(), 1) << "its full block stays in the pool, cached";
  EXPECT_EQ(bm.n_available(), 8 - 4);
  EXPECT_EQ(bm.tiers()->stats().host_entries, 1u) << "1 swapped + 1 cached = 2 blocks";
  ASSERT_TRUE(bm.swap_out(b, size_t{1} << 30));
  EXPECT_EQ(bm.tiers()->stats().host_entries, 0u) << "the cached entry made room";
  EXPECT_FALSE(bm.swap_out(d, size_t{1} << 30)) << "3 swapped blocks exceed 2";
  EXPECT_FALSE(d.swapped());
  EXPECT_EQ(d.block_table.size(), 2u);
  bm.free(a);
  EXPECT_EQ(bm.tiers()->host()->reserved_bytes(), block);
  bm.free(d);
  ASSERT_TRUE(bm.can_allocate(b, 1));
  EXPECT_EQ(bm.swap_in(b), 0);
  EXPECT_FALSE(b.swapped());
  EXPECT_EQ(b.block_table.size(), 2u);
  EXPECT_EQ(b.n_computed, 7);
  EXPECT_EQ(bm.tiers()->host()->reserved_bytes(), 0u);
  bm.free(b);
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.pool().n_used(), 0);
}

// A swapped sequence's cached blocks leave the pool when it needs room, down to the host
// tier, and swap_in() brings them back from there: the K/V comes back intact.
TEST(BlockManagerTest, SwappedBlocksGoDownTheTiersAndComeBack) {
  PagedKVCache kv(shape(), 8);
  KVTierOptions tiers;
  tiers.host_bytes = size_t{1} << 20;
  BlockManager bm(kv, /*prefix_caching=*/true, tiers);
  Sequence s = make_seq(11);
  bm.allocate(s, 10);
  s.n_computed = 10;
  write_tokens(kv, s, 10);
  ASSERT_TRUE(bm.swap_out(s, 0));
  EXPECT_EQ(s.n_swapped_cached, 2);
  Sequence other = make_seq(32);
  other.tokens[0] = 7;
  ASSERT_TRUE(bm.can_allocate(other, 32));
  bm.allocate(other, 32);  // the whole pool: s's cached blocks go to host memory
  EXPECT_EQ(bm.tiers()->stats().host_stores, 2);
  EXPECT_FALSE(bm.can_allocate(s, 1));
  bm.free(other);
  bm.clear_prefix_cache();
  ASSERT_TRUE(bm.can_allocate(s, 1));
  EXPECT_EQ(bm.swap_in(s), 0);
  EXPECT_EQ(bm.tiers()->stats().host_hits, 2);
  EXPECT_EQ(s.n_computed, 10);
  ASSERT_EQ(s.block_table.size(), 3u);
  expect_tokens(kv, s, 10);
  bm.allocate(s, 1);
  EXPECT_EQ(s.block_table.size(), 3u);
  bm.free(s);
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.pool().n_used(), 0);
}

// When a tier dropped one of a swapped sequence's blocks (no room, no disk), swap_in()
// resumes from the blocks found and reports the tokens to compute again.
TEST(BlockManagerTest, SwapInAfterATierDroppedABlockResumesFromWhatIsLeft) {
  PagedKVCache kv(shape(), 8);
  const size_t block = kv.shape().bytes_per_block();
  KVTierOptions tiers;
  tiers.host_bytes = 2 * block;
  BlockManager bm(kv, /*prefix_caching=*/true, tiers);
  Sequence s = make_seq(13);
  bm.allocate(s, 12);
  s.n_computed = 12;
  write_tokens(kv, s, 12);
  ASSERT_TRUE(bm.swap_out(s, 0));
  EXPECT_EQ(s.n_swapped_cached, 3);
  EXPECT_EQ(bm.swapped_bytes(), 0u) << "all three blocks are full";
  // Evicted deepest first: the last block goes first, and out of the 2-block host tier.
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.tiers()->stats().host_entries, 2u);
  EXPECT_EQ(bm.tiers()->stats().host_evictions, 1);
  EXPECT_EQ(bm.swap_in(s), 4);
  EXPECT_FALSE(s.swapped());
  EXPECT_EQ(s.n_computed, 8);
  ASSERT_EQ(s.block_table.size(), 2u);
  expect_tokens(kv, s, 8);
  EXPECT_EQ(bm.blocks_needed(s, 5), 2);
  bm.free(s);
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.pool().n_used(), 0);
}

// A sequence whose K/V a KV window cut is never shared: its swap copies every block.
TEST(BlockManagerTest, SwapOfAWindowedSequenceCopiesEveryBlock) {
  PagedKVCache kv(shape(), 8);
  KVTierOptions tiers;
  tiers.host_bytes = size_t{1} << 20;
  BlockManager bm(kv, /*prefix_caching=*/true, tiers);
  Sequence s = make_seq(11);
  s.n_evicted = 4;
  bm.allocate(s, 10);
  s.n_computed = 10;
  ASSERT_TRUE(bm.swap_out(s, 0));
  EXPECT_EQ(s.n_swapped_cached, 0);
  EXPECT_EQ(bm.swapped_bytes(), 3 * kv.shape().bytes_per_block());
  EXPECT_EQ(bm.prefix_cache()->n_cached(), 0);
  bm.allocate(s, 1);
  EXPECT_FALSE(s.swapped());
  bm.free(s);
  EXPECT_EQ(bm.pool().n_used(), 0);
}

// ---- Hot window (kv/paged_kv_cache.h): F16 copies of each sequence's newest blocks.

KVCacheShape int8_shape() {
  KVCacheShape s = shape();
  s.dtype = KVDType::Int8;
  return s;
}

// Which table entries seq holds hot copies of, [first, end).
std::pair<int32_t, int32_t> hot_range(const Sequence& s) {
  return {s.hot_first, s.hot_first + static_cast<int32_t>(s.hot_table.size())};
}

TEST(BlockManagerHotTest, CopiesCoverWhatTheStepReadsHotAndNoMore) {
  PagedKVCache kv(int8_shape(), 32, /*hot_window_blocks=*/2, /*n_hot_blocks=*/16);
  BlockManager bm(kv);
  Sequence s = make_seq(40);
  // A 10-token chunk from 0: entries 0..2 are written; all are read hot.
  bm.allocate(s, 10);
  EXPECT_EQ(hot_range(s), std::make_pair(0, 3));
  s.n_computed = 10;
  // A 9-token chunk from 10 (entries 2..4): queries in entry 4 read entries 3, 4 hot and
  // the first query (entry 2) reads 1, 2: the copy of entry 0 goes back.
  bm.allocate(s, 9);
  EXPECT_EQ(hot_range(s), std::make_pair(1, 5));
  s.n_computed = 19;
  // Decode at 19 (entry 4): entries 3 and 4.
  bm.allocate(s, 1);
  EXPECT_EQ(hot_range(s), std::make_pair(3, 5));
  EXPECT_EQ(kv.hot()->pool().n_used(), 2);
  s.n_computed = 20;
  bm.allocate(s, 1);  // entry 5 starts: 4 and 5
  EXPECT_EQ(hot_range(s), std::make_pair(4, 6));
  bm.free(s);
  EXPECT_EQ(kv.hot()->pool().n_used(), 0);
  EXPECT_EQ(kv.pool().n_used(), 0);
  EXPECT_TRUE(s.hot_table.empty());
}

// Writes, for every layer, F16 K and V values naming token t into seq's hot copies.
void write_hot(PagedKVCache& kv, const Sequence& s, int32_t from, int32_t to) {
  const int32_t bs = kv.block_size();
  for (int32_t l = 0; l < kv.shape().n_layer; ++l) {
    const PagedKVView view = kv.hot()->layer(l);
    for (int32_t t = from; t < to; ++t) {
      const int32_t b = s.hot_table[size_t(t / bs - s.hot_first)];
      auto* k = reinterpret_cast<uint16_t*>(view.k_tile(b, 0)) + (t % bs) * 4;
      for (int d = 0; d < 4; ++d) k[d] = uint16_t(l * 1000 + t * 10 + d);
    }
  }
}

void expect_hot(const PagedKVCache& kv, const Sequence& s, int32_t from, int32_t to) {
  const int32_t bs = kv.block_size();
  for (int32_t l = 0; l < kv.shape().n_layer; ++l) {
    const PagedKVView view = kv.hot()->layer(l);
    for (int32_t t = from; t < to; ++t) {
      const int32_t b = s.hot_table[size_t(t / bs - s.hot_first)];
      const auto* k = reinterpret_cast<const uint16_t*>(view.k_tile(b, 0)) + (t % bs) * 4;
      for (int d = 0; d < 4; ++d) {
        ASSERT_EQ(k[d], uint16_t(l * 1000 + t * 10 + d)) << "layer " << l << " token " << t;
      }
    }
  }
}

TEST(BlockManagerHotTest, SwapCarriesTheHotCopiesAndForksGetTheirOwn) {
  PagedKVCache kv(int8_shape(), 32, 2, 16);
  BlockManager bm(kv);
  Sequence s = make_seq(40);
  bm.allocate(s, 14);  // entries 0..3, all hot
  write_hot(kv, s, 0, 14);
  s.n_computed = 14;
  bm.allocate(s, 1);  // decode at 14: entries 2, 3
  ASSERT_EQ(hot_range(s), std::make_pair(2, 4));

  Sequence child = make_seq(40);
  child.n_computed = 14;
  bm.share(s, child);
  EXPECT_EQ(hot_range(child), hot_range(s));
  EXPECT_NE(child.hot_table, s.hot_table) << "hot copies are written: a fork needs its own";
  expect_hot(kv, child, 8, 14);

  const int32_t hot_used = kv.hot()->pool().n_used();
  ASSERT_TRUE(bm.swap_out(s, 1 << 20));
  EXPECT_TRUE(s.hot_table.empty());
  EXPECT_EQ(kv.hot()->pool().n_used(), hot_used - 2);
  EXPECT_GT(bm.swapped_bytes(), size_t(4) * kv.shape().bytes_per_block());
  bm.allocate(s, 1);  // back in, then the decode at 14
  EXPECT_EQ(hot_range(s), std::make_pair(2, 4));
  expect_hot(kv, s, 8, 14);
  EXPECT_EQ(bm.swapped_bytes(), 0u);
  bm.free(s);
  bm.free(child);
  EXPECT_EQ(kv.hot()->pool().n_used(), 0);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

// Right after a prefill chunk the parent still holds copies of the whole chunk (they go back
// at its next step): a fork takes only those its own next queries read hot.
TEST(BlockManagerHotTest, ForkCopiesOnlyWhatItReadsHot) {
  PagedKVCache kv(int8_shape(), 32, 2, 16);
  BlockManager bm(kv);
  Sequence s = make_seq(40);
  bm.allocate(s, 22);  // entries 0..5
  write_hot(kv, s, 0, 22);
  s.n_computed = 22;  // entry 5 is being filled: the next queries read 4 and 5 hot
  ASSERT_EQ(hot_range(s), std::make_pair(0, 6));
  Sequence child = make_seq(40);
  child.n_computed = 22;
  bm.share(s, child);
  EXPECT_EQ(hot_range(child), std::make_pair(4, 6));
  expect_hot(kv, child, 16, 22);
  bm.trim_hot(s);
  EXPECT_EQ(hot_range(s), std::make_pair(4, 6));
  EXPECT_EQ(kv.hot()->pool().n_used(), 4);
  bm.free(s);
  bm.free(child);
  EXPECT_EQ(kv.hot()->pool().n_used(), 0);
}

TEST(BlockManagerHotTest, HotCacheSizeCoversEveryRunningSequence) {
  // max_seqs x (window + the block being filled + one a step may start) + a step's blocks.
  EXPECT_EQ(BlockManager::hot_blocks_needed(1, 16, 4, 64), 4 * 3 + 4);
  EXPECT_EQ(BlockManager::hot_blocks_needed(16, 16, 2, 33), 2 * 18 + 3);
}

TEST(BlockManagerHotTest, Q4CKeysNeedAHotWindow) {
  KVCacheShape s = shape();
  s.dtype = KVDTypes(KVDType::Q4C, KVDType::Q4);
  s.head_dim_k = s.head_dim_v = 32;
  EXPECT_THROW(PagedKVCache(s, 8), Error);
  const PagedKVCache kv(s, 8, 1, 4);
  EXPECT_EQ(kv.hot()->dtype(), KVDTypes(KVDType::F16));
  EXPECT_EQ(kv.hot_window_blocks(), 1);
}

}  // namespace
}  // namespace tokamak
