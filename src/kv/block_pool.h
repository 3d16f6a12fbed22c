#pragma once
// BlockPool: which KV blocks are free, and how many owners each used block has.
//
// Plain bookkeeping, no KV data (that is PagedKVCache): the scheduler and the tests use it
// with no model behind it. A block is owned by every sequence whose block table names it;
// sharing (n > 1 samples of one prompt, later prefix caching) adds owners, and a block goes
// back to the free list when its last owner releases it. Writing into a block with more than
// one owner is not allowed: the owner copies it first (copy-on-write, see PagedKVCache).
//
// Free blocks are handed out lowest id first (a min-heap), so which blocks a run uses
// depends only on the order of calls, never on addresses: runs are reproducible.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tokamak {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);  // n_blocks >= 1, all free

  int32_t n_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_used() const { return n_blocks() - n_free(); }
  // Most blocks in use at once since construction or the last reset_peak().
  int32_t peak_used() const { return peak_used_; }
  void reset_peak() { peak_used_ = n_used(); }

  // One free block with one owner, or nullopt when none is free.
  std::optional<int32_t> allocate();
  // n free blocks appended to `out`, or false (and nothing taken) when fewer are free.
  bool allocate(int32_t n, std::vector<int32_t>& out);

  // Adds an owner to a used block.
  void retain(int32_t block);
  // Drops an owner; the block is free again when it was the last.
  void release(int32_t block);
  void release(std::span<const int32_t> blocks);

  int32_t ref_count(int32_t block) const;  // 0 for a free block

 private:
  std::vector<int32_t> ref_counts_;  // (n_blocks)
  std::vector<int32_t> free_;        // min-heap of free block ids
  int32_t peak_used_ = 0;
};

}  // namespace tokamak
