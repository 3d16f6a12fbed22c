#pragma once
// DiskKVTier: a bounded directory of KV blocks that outlives the process: the host tier's
// overflow goes here, and after a restart the same model finds its blocks again.
//
// One file per block, <64 hex digits of the BlockKey>.kvb, written to a .tmp name and
// renamed so that a crash never leaves a half-written entry under a real name:
//
//   offset  size  field
//        0     8  magic "TKMKVBLK"
//        8     4  format version (1), little-endian like every field
//       12     4  n_tokens (the block size)
//       16     8  payload bytes (bytes per block)
//       24    32  store identity (model identity + KV dtype and shape: see identity below)
//       56    32  key          must equal chain_block_key(parent, tokens) and the file name
//       88    32  parent key
//      120  4 x n tokens (int32)
//        ...   payload (save_blocks' layout)
//      end     8  checksum64 of every byte before it
//
// Nothing read from the directory is trusted: at start-up every *.kvb file is read whole
// and removed unless its header parses, its identity is this store's, its size is exact,
// its key matches its tokens and name, and its checksum holds; leftover *.tmp files are
// removed too. A load checks all of it again (the file may have changed since) and removes
// a file that fails. Files with other names are left alone and never read.
//
// The bound is on the payload files' total size; least recently used go first (file
// modification time at start-up, then an in-memory order; a load refreshes the mtime so the
// order survives a restart). Synchronous I/O on the caller's thread; one process per
// directory at a time.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/block_key.h"

namespace tokamak {

struct DiskKVTierStats {
  int64_t stored = 0;    // files written
  int64_t evicted = 0;   // files removed for room
  int64_t rejected = 0;  // files removed as invalid (start-up scan and loads)
  int64_t loaded = 0;    // blocks read back
};

class DiskKVTier {
 public:
  // Creates `dir` if missing and scans it. identity: what must match for an entry to be
  // reused (see kv_store_identity); n_tokens, payload_bytes: every entry's. Throws Error
  // when the directory cannot be created or listed.
  DiskKVTier(std::filesystem::path dir, size_t capacity_bytes, const BlockKey& identity,
             int32_t n_tokens, size_t payload_bytes);

  const std::filesystem::path& dir() const { return dir_; }
  size_t capacity() const { return capacity_; }
  size_t used_bytes() const { return used_; }
  size_t n_entries() const { return index_.size(); }
  const DiskKVTierStats& stats() const { return stats_; }
  size_t file_bytes() const;  // size of one entry's file

  bool contains(const BlockKey& key) const { return index_.count(key) != 0; }
  // Writes the block (unless its key is stored already: then it is only touched), evicting
  // old files for room. False when it could not be written (no room at all, I/O error).
  bool put(const BlockKey& key, const BlockKey& parent, std::span<const int32_t> tokens,
           std::span<const uint8_t> payload);
  // Reads the block with this key, parent and tokens into `payload` (payload_bytes). False
  // when there is none or its file fails a check (it is then removed).
  bool load(const BlockKey& key, const BlockKey& parent, std::span<const int32_t> tokens,
            std::vector<uint8_t>& payload);

 private:
  // The checked contents of a file: false when it must not be trusted.
  bool read_entry(const std::filesystem::path& path, const BlockKey* expect_key,
                  std::vector<uint8_t>& file) const;
  void scan();
  void add_to_index(const BlockKey& key, uint64_t tick);
  void remove_oldest();  // the least recently used entry
  void remove(const BlockKey& key, bool rejected);
  std::filesystem::path path_of(const BlockKey& key) const;

  std::filesystem::path dir_;
  size_t capacity_;
  BlockKey identity_;
  int32_t n_tokens_;
  size_t payload_bytes_;
  std::unordered_map<BlockKey, uint64_t, BlockKeyHash> index_;  // key -> tick
  std::set<std::pair<uint64_t, BlockKey>> lru_;                 // (tick, key), oldest first
  uint64_t tick_ = 0;
  size_t used_ = 0;
  std::vector<uint8_t> scratch_;  // (file_bytes) one file, reused
  DiskKVTierStats stats_;
};

}  // namespace tokamak
