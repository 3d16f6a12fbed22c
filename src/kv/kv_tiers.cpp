#include "kv/kv_tiers.h"

#include <cassert>

#include "core/error.h"
#include "core/sha256.h"

namespace tokamak {

BlockKey kv_store_identity(const BlockKey& model_identity, const KVCacheShape& s) {
  Sha256 sha;
  // v2: q4 rows are stored Hadamard-rotated; K and V dtypes may differ.
  const char tag[] = "tokamak kv block v2";
  sha.update(tag, sizeof(tag));
  sha.update(model_identity.data(), model_identity.size());
  const int32_t fields[] = {static_cast<int32_t>(s.dtype.k),
                            static_cast<int32_t>(s.dtype.v),
                            s.block_size,
                            s.n_layer,
                            s.n_head_kv,
                            s.head_dim_k,
                            s.head_dim_v};
  sha.update(fields, sizeof(fields));
  const uint64_t bytes = s.bytes_per_block();
  sha.update(&bytes, sizeof(bytes));
  return sha.finish();
}

KVTiers::KVTiers(PagedKVCache& kv, const KVTierOptions& opts) : kv_(kv) {
  const size_t block_bytes = kv.shape().bytes_per_block();
  if (!opts.disk_dir.empty()) {
    if (!opts.model_identity) throw Error("KV disk tier: no model identity to tag entries with");
    disk_ = std::make_unique<DiskKVTier>(opts.disk_dir, opts.disk_bytes,
                                         kv_store_identity(*opts.model_identity, kv.shape()),
                                         kv.block_size(), block_bytes);
  }
  if (opts.host_bytes > 0) {
    host_ = std::make_unique<HostKVTier>(opts.host_bytes,
                                         [this](KVBlockEntry&& e) { spill(std::move(e)); });
  }
}

void KVTiers::spill(KVBlockEntry&& entry) {
  if (disk_) disk_->put(entry.key, entry.parent, entry.tokens, entry.bytes);
}

void KVTiers::store(const BlockKey& key, const BlockKey& parent, std::span<const int32_t> tokens,
                    int32_t block) {
  const int32_t blocks[] = {block};
  if (host_) {
    if (host_->contains(key)) return;
    KVBlockEntry e;
    e.key = key;
    e.parent = parent;
    e.tokens.assign(tokens.begin(), tokens.end());
    kv_.save_blocks(blocks, e.bytes);
    if (host_->put(std::move(e))) ++host_stores_;
    return;
  }
  if (disk_ && !disk_->contains(key)) {
    buffer_.clear();
    kv_.save_blocks(blocks, buffer_);
    disk_->put(key, parent, tokens, buffer_);
  }
}

std::optional<KVTier> KVTiers::load(const BlockKey& key, const BlockKey& parent,
                                    std::span<const int32_t> tokens, int32_t block) {
  const int32_t blocks[] = {block};
  if (host_) {
    if (std::optional<KVBlockEntry> e = host_->take(key, parent, tokens)) {
      kv_.load_blocks(blocks, e->bytes);
      ++host_hits_;
      return KVTier::Host;
    }
  }
  if (disk_ && disk_->load(key, parent, tokens, buffer_)) {
    kv_.load_blocks(blocks, buffer_);
    ++disk_hits_;
    return KVTier::Disk;
  }
  return std::nullopt;
}

void KVTiers::flush_host() {
  if (host_) host_->spill_all();
}

KVTierStats KVTiers::stats() const {
  KVTierStats s;
  s.host_stores = host_stores_;
  s.host_hits = host_hits_;
  s.disk_hits = disk_hits_;
  if (host_) {
    s.host_evictions = host_->n_evicted();
    s.host_bytes = host_->entry_bytes();
    s.host_entries = host_->n_entries();
  }
  if (disk_) {
    s.disk_stores = disk_->stats().stored;
    s.disk_evictions = disk_->stats().evicted;
    s.disk_rejected = disk_->stats().rejected;
    s.disk_bytes = disk_->used_bytes();
    s.disk_entries = disk_->n_entries();
  }
  return s;
}

}  // namespace tokamak
