// HostKVTier with no pool behind it: entries come back exactly once (a hit takes them), a
// lookup with the right key but other tokens or parent misses, the byte bound pushes out
// the least recently used entries through the spill function, and swap reservations share
// the bound without ever being pushed out. Also BlockKey's chaining.

#include "kv/host_kv_tier.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokamak {
namespace {

std::vector<int32_t> toks(int32_t first) {
  return {first, first + 1, first + 2, first + 3};
}

// Entry i: the block after `parent` with tokens toks(i), `bytes` bytes of value i.
KVBlockEntry entry(int32_t i, size_t bytes = 100, const BlockKey& parent = kRootBlockKey) {
  KVBlockEntry e;
  e.parent = parent;
  e.tokens = toks(i);
  e.key = chain_block_key(parent, e.tokens);
  e.bytes.assign(bytes, uint8_t(i));
  return e;
}

TEST(BlockKeyTest, ChainsOverEveryEarlierToken) {
  const BlockKey a = chain_block_key(kRootBlockKey, toks(1));
  EXPECT_EQ(a, chain_block_key(kRootBlockKey, toks(1)));
  EXPECT_NE(a, chain_block_key(kRootBlockKey, toks(2)));
  const BlockKey b1 = chain_block_key(a, toks(5));
  const BlockKey b2 = chain_block_key(chain_block_key(kRootBlockKey, toks(2)), toks(5));
  EXPECT_NE(b1, b2) << "same tokens after a different prefix: a different block";
  EXPECT_EQ(block_key_hex(a).size(), 64u);
}

TEST(HostKVTierTest, TakeReturnsTheEntryOnceAndChecksTokensAndParent) {
  HostKVTier tier(1000);
  KVBlockEntry e = entry(1);
  const BlockKey key = e.key;
  ASSERT_TRUE(tier.put(std::move(e)));
  EXPECT_EQ(tier.n_entries(), 1u);
  EXPECT_EQ(tier.used_bytes(), 100u);
  EXPECT_FALSE(tier.take(key, kRootBlockKey, toks(2))) << "other tokens: a miss";
  EXPECT_FALSE(tier.take(key, key, toks(1))) << "other parent: a miss";
  EXPECT_TRUE(tier.contains(key)) << "a miss leaves the entry";
  auto got = tier.take(key, kRootBlockKey, toks(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->bytes, std::vector<uint8_t>(100, 1));
  EXPECT_EQ(got->tokens, toks(1));
  EXPECT_FALSE(tier.contains(key));
  EXPECT_EQ(tier.used_bytes(), 0u);
  EXPECT_FALSE(tier.take(key, kRootBlockKey, toks(1)));
}

TEST(HostKVTierTest, TheByteBoundSpillsLeastRecentlyUsedFirst) {
  std::vector<int32_t> spilled;
  HostKVTier tier(300, [&](KVBlockEntry&& e) { spilled.push_back(e.tokens[0]); });
  for (int32_t i : {1, 2, 3}) ASSERT_TRUE(tier.put(entry(i)));
  EXPECT_TRUE(spilled.empty());
  ASSERT_TRUE(tier.put(entry(1))) << "already there: touched, now the most recent";
  EXPECT_EQ(tier.used_bytes(), 300u);
  ASSERT_TRUE(tier.put(entry(4)));
  EXPECT_EQ(spilled, std::vector<int32_t>{2});
  ASSERT_TRUE(tier.put(entry(5)));
  EXPECT_EQ(spilled, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tier.used_bytes(), 300u);
  EXPECT_EQ(tier.n_evicted(), 2);
  EXPECT_FALSE(tier.put(entry(6, 301))) << "larger than the whole tier";
  EXPECT_EQ(tier.n_entries(), 3u);
  tier.spill_all();
  EXPECT_EQ(spilled, (std::vector<int32_t>{2, 3, 1, 4, 5}));
  EXPECT_EQ(tier.used_bytes(), 0u);
}

TEST(HostKVTierTest, ReservationsShareTheBoundAndAreNeverSpilled) {
  std::vector<int32_t> spilled;
  HostKVTier tier(300, [&](KVBlockEntry&& e) { spilled.push_back(e.tokens[0]); });
  for (int32_t i : {1, 2}) ASSERT_TRUE(tier.put(entry(i)));
  ASSERT_TRUE(tier.reserve(150)) << "entries make room for swapped bytes";
  EXPECT_EQ(spilled, std::vector<int32_t>{1});
  EXPECT_EQ(tier.used_bytes(), 250u);
  EXPECT_FALSE(tier.reserve(151)) << "reservations never push out reservations";
  EXPECT_EQ(tier.used_bytes(), 250u);
  ASSERT_TRUE(tier.reserve(150));
  EXPECT_EQ(tier.n_entries(), 0u);
  EXPECT_FALSE(tier.put(entry(3))) << "no room beside 300 reserved bytes";
  tier.unreserve(300);
  EXPECT_EQ(tier.used_bytes(), 0u);
  EXPECT_TRUE(tier.put(entry(3)));
}

}  // namespace
}  // namespace tokamak
