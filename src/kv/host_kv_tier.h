#pragma once
// HostKVTier: a bounded store in host memory of KV blocks the pool's prefix cache evicted,
// so that a later request with the same prefix copies them back instead of recomputing.
//
//   pool (PrefixCache) --evict--> HostKVTier --overflow, LRU--> spill (disk tier, or dropped)
//            ^                        |
//            +------- hit: take ------+          (exclusive: a hit leaves the host tier)
//
// An entry is one full block: its BlockKey (kv/block_key.h), its parent's key and its
// tokens (compared on lookup, so a key collision cannot serve wrong K/V), and its bytes as
// PagedKVCache::save_blocks lays them out. Capacity is in bytes and counts the entries'
// bytes plus `reserved` bytes that swap preemption holds in the same host budget (see
// BlockManager::swap_out): reserving evicts entries, least recently used first, never
// reserved bytes. Plain data, no pool or model behind it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/block_key.h"

namespace tokamak {

struct KVBlockEntry {
  BlockKey key{};
  BlockKey parent{};
  std::vector<int32_t> tokens;  // (block_size)
  std::vector<uint8_t> bytes;   // (bytes per block) in save_blocks' layout
};

class HostKVTier {
 public:
  // Receives each entry evicted for room (least recently used first).
  using Spill = std::function<void(KVBlockEntry&&)>;

  explicit HostKVTier(size_t capacity_bytes, Spill spill = {});

  size_t capacity() const { return capacity_; }
  size_t used_bytes() const { return entry_bytes_ + reserved_; }
  size_t entry_bytes() const { return entry_bytes_; }
  size_t reserved_bytes() const { return reserved_; }
  size_t n_entries() const { return entries_.size(); }
  int64_t n_evicted() const { return n_evicted_; }

  bool contains(const BlockKey& key) const { return entries_.count(key) != 0; }
  // Stores `entry` as the most recently used, evicting older entries for room. An entry
  // already stored under the key is only touched. False (and nothing stored) when the
  // entry alone does not fit beside the reserved bytes.
  bool put(KVBlockEntry&& entry);
  // Removes and returns the entry with this key, parent and tokens; nullopt if there is
  // none (an entry with the key but other parent or tokens stays).
  std::optional<KVBlockEntry> take(const BlockKey& key, const BlockKey& parent,
                                   std::span<const int32_t> tokens);
  // Removes every entry, least recently used first, through the spill function.
  void spill_all();

  // Swap preemption's host memory in the same budget: true and reserved, evicting entries
  // for room; false (nothing changes) when bytes do not fit beside the other reservations.
  bool reserve(size_t bytes);
  void unreserve(size_t bytes);

 private:
  struct Slot {
    KVBlockEntry entry;
    uint64_t tick = 0;
  };
  // Evicts least recently used entries until `bytes` more fit; false if they cannot.
  bool make_room(size_t bytes);
  void evict_oldest();

  size_t capacity_;
  Spill spill_;
  std::unordered_map<BlockKey, Slot, BlockKeyHash> entries_;
  std::set<std::pair<uint64_t, BlockKey>> lru_;  // (tick, key), oldest first
  uint64_t tick_ = 0;
  size_t entry_bytes_ = 0;
  size_t reserved_ = 0;
  int64_t n_evicted_ = 0;
};

}  // namespace tokamak
