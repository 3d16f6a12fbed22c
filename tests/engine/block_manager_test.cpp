// BlockManager with no model: how many blocks a sequence's next tokens need, how many tokens
// the free blocks hold, swapping a sequence's K/V to host memory and back (data intact, host
// bytes accounted and given back), and the host limit.

#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <vector>

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

// With a host tier, swapped blocks count against its budget (--swap-space is not used), and
// cached entries make room for them, never the other way round.
TEST(BlockManagerTest, SwapSharesTheHostTiersBudget) {
  PagedKVCache kv(shape(), 8);
  const size_t block = kv.shape().bytes_per_block();
  KVTierOptions tiers;
  tiers.host_bytes = 3 * block;
  BlockManager bm(kv, /*prefix_caching=*/true, tiers);
  // A cached block that the pool then evicts: it lands in the host tier.
  Sequence c = make_seq(5);
  bm.allocate(c, 4);
  c.n_computed = 4;
  bm.cache_full_blocks(c);
  bm.free(c);
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.tiers()->stats().host_entries, 1u);
  EXPECT_EQ(bm.tiers()->stats().host_stores, 1);

  Sequence a = make_seq(8);
  bm.allocate(a, 8);
  a.n_computed = 8;
  Sequence b = make_seq(8);
  bm.allocate(b, 8);
  b.n_computed = 8;
  ASSERT_TRUE(bm.swap_out(a, /*host_limit=*/0)) << "the limit is the tier's, not host_limit";
  EXPECT_EQ(bm.tiers()->stats().host_entries, 1u) << "2 swapped + 1 cached = 3 blocks";
  EXPECT_FALSE(bm.swap_out(b, size_t{1} << 30)) << "2 + 2 swapped blocks exceed 3";
  bm.free(a);
  EXPECT_EQ(bm.tiers()->host()->reserved_bytes(), 0u);
  ASSERT_TRUE(bm.swap_out(b, 0));
  bm.allocate(b, 1);  // swapped back in
  EXPECT_FALSE(b.swapped());
  EXPECT_EQ(bm.tiers()->host()->reserved_bytes(), 0u);
  bm.free(b);
  bm.clear_prefix_cache();
  EXPECT_EQ(bm.pool().n_used(), 0);
}

}  // namespace
}  // namespace tokamak
