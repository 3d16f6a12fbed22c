#pragma once
// KVTiers: the lower tiers under the pool's prefix cache, and the one place that copies a
// block between the pool and them.
//
//   pool block --store()--> host tier (bounded bytes, LRU) --overflow--> disk tier | dropped
//   pool block <--load()--- host tier (the entry leaves it) or disk tier (the file stays)
//
// With no host tier (host bytes 0) store() writes straight to the disk tier. The host
// tier's budget also holds swap preemption's bytes (reserve_host), so cached blocks and
// swapped sequences share one bound on host memory.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/block_key.h"
#include "kv/disk_kv_tier.h"
#include "kv/host_kv_tier.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {

struct KVTierOptions {
  size_t host_bytes = 0;  // 0: no host tier
  std::string disk_dir;   // empty: no disk tier
  size_t disk_bytes = 0;
  // What identifies the model's weights (format/gguf_identity.h); the disk tier needs it.
  std::optional<BlockKey> model_identity;

  bool any() const { return host_bytes > 0 || !disk_dir.empty(); }
};

// The identity a disk entry must carry to be reused: the model's, and everything that
// shapes a block's bytes (KV dtype, block size, layers, KV heads, head dims).
BlockKey kv_store_identity(const BlockKey& model_identity, const KVCacheShape& shape);

enum class KVTier { Host, Disk };

struct KVTierStats {
  int64_t host_stores = 0;     // blocks copied from the pool into host memory
  int64_t host_hits = 0;       // blocks copied back from host memory
  int64_t host_evictions = 0;  // entries pushed out of host memory (to disk or dropped)
  size_t host_bytes = 0;       // cached entries' bytes now (swap reservations excluded)
  size_t host_entries = 0;
  int64_t disk_stores = 0;
  int64_t disk_hits = 0;
  int64_t disk_evictions = 0;
  int64_t disk_rejected = 0;  // files removed as corrupt, truncated or foreign
  size_t disk_bytes = 0;
  size_t disk_entries = 0;
};

class KVTiers {
 public:
  // Throws Error when the disk tier's directory cannot be used or no model identity is
  // given for it.
  KVTiers(PagedKVCache& kv, const KVTierOptions& opts);

  bool has_host() const { return host_ != nullptr; }
  bool has_disk() const { return disk_ != nullptr; }
  HostKVTier* host() { return host_.get(); }
  DiskKVTier* disk() { return disk_.get(); }

  // Whether a tier has an entry under the key (load() still checks parent and tokens).
  bool contains(const BlockKey& key) const {
    return (host_ && host_->contains(key)) || (disk_ && disk_->contains(key));
  }
  // Copies pool block `block`, the full block (key, parent, tokens), down a tier.
  void store(const BlockKey& key, const BlockKey& parent, std::span<const int32_t> tokens,
             int32_t block);
  // Copies the block (key, parent, tokens) into pool block `block` from the highest tier
  // that has it; nullopt (block untouched) when none does.
  std::optional<KVTier> load(const BlockKey& key, const BlockKey& parent,
                             std::span<const int32_t> tokens, int32_t block);
  // Moves every host entry down to the disk tier (or drops them without one).
  void flush_host();

  // Swap preemption's share of the host budget (false: it does not fit).
  bool reserve_host(size_t bytes) { return host_->reserve(bytes); }
  void unreserve_host(size_t bytes) { host_->unreserve(bytes); }

  KVTierStats stats() const;

 private:
  void spill(KVBlockEntry&& entry);

  PagedKVCache& kv_;
  std::unique_ptr<DiskKVTier> disk_;
  std::unique_ptr<HostKVTier> host_;
  std::vector<uint8_t> buffer_;  // (bytes per block) for disk traffic without a host tier
  int64_t host_stores_ = 0;
  int64_t host_hits_ = 0;
  int64_t disk_hits_ = 0;
};

}  // namespace tokamak
