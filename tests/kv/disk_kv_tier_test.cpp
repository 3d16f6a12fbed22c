// DiskKVTier over a temporary directory: entries survive a "restart" (a new object scanning
// the same directory) byte for byte; a flipped byte, a truncated or extended file, another
// model's entry, a garbage file under an entry's name and a leftover .tmp are removed at the
// scan and never served, and damage done after the scan is caught at load; the byte bound
// removes the least recently used files.

#include "kv/disk_kv_tier.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tokamak {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kTokens = 4;
constexpr size_t kPayload = 256;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tokamak_disk_tier_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

BlockKey identity(uint8_t id) {
  BlockKey k{};
  k[0] = id;
  return k;
}

struct Block {
  BlockKey key, parent;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> payload;
};

Block block(int32_t i, const BlockKey& parent = kRootBlockKey) {
  Block b;
  b.parent = parent;
  b.tokens = {i, i + 1, i + 2, i + 3};
  b.key = chain_block_key(parent, b.tokens);
  for (size_t j = 0; j < kPayload; ++j) b.payload.push_back(uint8_t(i * 31 + j));
  return b;
}

DiskKVTier open_tier(const fs::path& dir, uint8_t id = 1, size_t capacity = 1 << 20) {
  return DiskKVTier(dir, capacity, identity(id), kTokens, kPayload);
}

fs::path file_of(const fs::path& dir, const Block& b) {
  return dir / (block_key_hex(b.key) + ".kvb");
}

bool load(DiskKVTier& tier, const Block& b, std::vector<uint8_t>& out) {
  return tier.load(b.key, b.parent, b.tokens, out);
}

void flip_byte(const fs::path& path, std::streamoff at_from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-at_from_end, std::ios::end);
  char c;
  f.get(c);
  f.seekp(-at_from_end, std::ios::end);
  f.put(char(c ^ 0x40));
}

TEST(DiskKVTierTest, EntriesComeBackAfterARestart) {
  TempDir dir;
  const Block a = block(1), b = block(5, a.key);
  {
    DiskKVTier tier = open_tier(dir.path);
    EXPECT_EQ(tier.n_entries(), 0u);
    ASSERT_TRUE(tier.put(a.key, a.parent, a.tokens, a.payload));
    ASSERT_TRUE(tier.put(b.key, b.parent, b.tokens, b.payload));
    EXPECT_EQ(tier.used_bytes(), 2 * tier.file_bytes());
    EXPECT_EQ(tier.stats().stored, 2);
  }
  DiskKVTier tier = open_tier(dir.path);  // a new process, as far as the tier can tell
  EXPECT_EQ(tier.n_entries(), 2u);
  EXPECT_EQ(tier.stats().rejected, 0);
  std::vector<uint8_t> got;
  ASSERT_TRUE(load(tier, b, got));
  EXPECT_EQ(got, b.payload);
  ASSERT_TRUE(load(tier, a, got));
  EXPECT_EQ(got, a.payload);
  EXPECT_TRUE(tier.contains(a.key)) << "a load keeps the file";
  EXPECT_FALSE(tier.load(a.key, a.parent, b.tokens, got)) << "other tokens: a miss";
  EXPECT_FALSE(tier.load(a.key, b.key, a.tokens, got)) << "other parent: a miss";
}

TEST(DiskKVTierTest, DamagedForeignAndGarbageFilesAreRemovedAtTheScan) {
  TempDir dir;
  const Block good = block(1), flipped = block(2), cut = block(3), longer = block(4),
              header = block(6), foreign = block(7);
  {
    DiskKVTier tier = open_tier(dir.path);
    for (const Block* b : {&good, &flipped, &cut, &longer, &header}) {
      ASSERT_TRUE(tier.put(b->key, b->parent, b->tokens, b->payload));
    }
  }
  {
    // Another model's entry (same shapes, other identity), written elsewhere and copied in.
    TempDir elsewhere;
    DiskKVTier other_model = open_tier(elsewhere.path, /*id=*/2);
    ASSERT_TRUE(other_model.put(foreign.key, foreign.parent, foreign.tokens, foreign.payload));
    fs::copy_file(file_of(elsewhere.path, foreign), file_of(dir.path, foreign));
  }
  flip_byte(file_of(dir.path, flipped), 100);  // in the payload
  fs::resize_file(file_of(dir.path, cut), fs::file_size(file_of(dir.path, cut)) - 1);
  std::ofstream(file_of(dir.path, longer), std::ios::app | std::ios::binary) << "x";
  flip_byte(file_of(dir.path, header), fs::file_size(file_of(dir.path, header)) - 12);  // n_tokens
  const Block garbage = block(9);
  std::ofstream(file_of(dir.path, garbage), std::ios::binary) << "not a KV block";
  std::ofstream(dir.path / (block_key_hex(block(10).key) + ".kvb.tmp")) << "half written";
  std::ofstream(dir.path / "notes.txt") << "someone else's file";

  DiskKVTier tier = open_tier(dir.path);
  EXPECT_EQ(tier.n_entries(), 1u);
  EXPECT_EQ(tier.stats().rejected, 7);
  std::vector<uint8_t> got;
  EXPECT_TRUE(load(tier, good, got));
  for (const Block* b : {&flipped, &cut, &longer, &header, &foreign, &garbage}) {
    EXPECT_FALSE(load(tier, *b, got));
    EXPECT_FALSE(fs::exists(file_of(dir.path, *b)));
  }
  EXPECT_TRUE(fs::exists(dir.path / "notes.txt")) << "files not named like entries are left alone";
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 2u) << "the good entry and notes.txt";
}

TEST(DiskKVTierTest, DamageAfterTheScanIsCaughtAtLoad) {
  TempDir dir;
  const Block a = block(1);
  DiskKVTier tier = open_tier(dir.path);
  ASSERT_TRUE(tier.put(a.key, a.parent, a.tokens, a.payload));
  flip_byte(file_of(dir.path, a), 20);
  std::vector<uint8_t> got;
  EXPECT_FALSE(load(tier, a, got));
  EXPECT_FALSE(tier.contains(a.key));
  EXPECT_FALSE(fs::exists(file_of(dir.path, a)));
  EXPECT_EQ(tier.stats().rejected, 1);
  EXPECT_EQ(tier.used_bytes(), 0u);
}

TEST(DiskKVTierTest, AnotherModelRemovesTheEntriesItFinds) {
  TempDir dir;
  const Block a = block(1), b = block(2);
  {
    DiskKVTier tier = open_tier(dir.path);
    ASSERT_TRUE(tier.put(a.key, a.parent, a.tokens, a.payload));
    ASSERT_TRUE(tier.put(b.key, b.parent, b.tokens, b.payload));
  }
  DiskKVTier other_model = open_tier(dir.path, /*id=*/2);
  EXPECT_EQ(other_model.n_entries(), 0u);
  EXPECT_EQ(other_model.stats().rejected, 2);
  std::vector<uint8_t> got;
  EXPECT_FALSE(load(other_model, a, got));
  EXPECT_FALSE(fs::exists(file_of(dir.path, a)));
}

TEST(DiskKVTierTest, TheByteBoundRemovesTheLeastRecentlyUsed) {
  TempDir dir;
  const size_t file = open_tier(dir.path).file_bytes();
  DiskKVTier tier = open_tier(dir.path, 1, 3 * file);
  const Block b1 = block(1), b2 = block(2), b3 = block(3), b4 = block(4);
  for (const Block* b : {&b1, &b2, &b3})
    ASSERT_TRUE(tier.put(b->key, b->parent, b->tokens, b->payload));
  std::vector<uint8_t> got;
  ASSERT_TRUE(load(tier, b1, got));  // b2 is now the oldest
  ASSERT_TRUE(tier.put(b4.key, b4.parent, b4.tokens, b4.payload));
  EXPECT_EQ(tier.n_entries(), 3u);
  EXPECT_FALSE(tier.contains(b2.key));
  EXPECT_FALSE(fs::exists(file_of(dir.path, b2)));
  EXPECT_EQ(tier.stats().evicted, 1);
  EXPECT_LE(tier.used_bytes(), 3 * file);
  // A smaller bound after a restart keeps the most recent.
  DiskKVTier smaller = open_tier(dir.path, 1, 2 * file);
  EXPECT_EQ(smaller.n_entries(), 2u);
}

}  // namespace
}  // namespace tokamak
