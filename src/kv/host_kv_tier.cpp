#include "kv/host_kv_tier.h"

#include <algorithm>
#include <cassert>

namespace tokamak {

// Invariants: lru_ holds exactly (slot.tick, key) of every entry; entry_bytes_ is the sum of
// the entries' byte sizes; entry_bytes_ + reserved_ <= capacity_.

HostKVTier::HostKVTier(size_t capacity_bytes, Spill spill)
    : capacity_(capacity_bytes), spill_(std::move(spill)) {}

void HostKVTier::evict_oldest() {
  assert(!lru_.empty());
  const auto oldest = lru_.begin();
  auto it = entries_.find(oldest->second);
  assert(it != entries_.end());
  lru_.erase(oldest);
  KVBlockEntry entry = std::move(it->second.entry);
  entries_.erase(it);
  entry_bytes_ -= entry.bytes.size();
  ++n_evicted_;
  if (spill_) spill_(std::move(entry));
}

bool HostKVTier::make_room(size_t bytes) {
  if (bytes > capacity_ - reserved_) return false;
  while (entry_bytes_ + reserved_ + bytes > capacity_) evict_oldest();
  return true;
}

bool HostKVTier::put(KVBlockEntry&& entry) {
  auto it = entries_.find(entry.key);
  if (it != entries_.end()) {
    lru_.erase({it->second.tick, entry.key});
    it->second.tick = ++tick_;
    lru_.emplace(it->second.tick, entry.key);
    return true;
  }
  if (!make_room(entry.bytes.size())) return false;
  const BlockKey key = entry.key;
  entry_bytes_ += entry.bytes.size();
  Slot slot{std::move(entry), ++tick_};
  lru_.emplace(slot.tick, key);
  entries_.emplace(key, std::move(slot));
  return true;
}

std::optional<KVBlockEntry> HostKVTier::take(const BlockKey& key, const BlockKey& parent,
                                             std::span<const int32_t> tokens) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const KVBlockEntry& e = it->second.entry;
  if (e.parent != parent ||
      !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) {
    return std::nullopt;
  }
  lru_.erase({it->second.tick, key});
  KVBlockEntry out = std::move(it->second.entry);
  entries_.erase(it);
  entry_bytes_ -= out.bytes.size();
  return out;
}

void HostKVTier::spill_all() {
  while (!lru_.empty()) evict_oldest();
}

bool HostKVTier::reserve(size_t bytes) {
  if (!make_room(bytes)) return false;
  reserved_ += bytes;
  return true;
}

void HostKVTier::unreserve(size_t bytes) {
  assert(bytes <= reserved_);
  reserved_ -= bytes;
}

}  // namespace tokamak
