#pragma once
// BlockManager: a sequence's KV blocks — allocating them for the tokens a step will compute,
// copy-on-write of a shared block before it is written, sharing a parent's blocks with a
// forked sample, freeing, and swapping to host memory and back. The scheduler asks it
// "can this sequence compute n more tokens?" and it answers from the pool without side
// effects; allocate() then cannot fail.

#include <cstdint>

#include "kv/paged_kv_cache.h"

namespace tokamak {

struct Sequence;

class BlockManager {
 public:
  explicit BlockManager(PagedKVCache& kv) : kv_(kv) {}

  PagedKVCache& cache() { return kv_; }
  const BlockPool& pool() const { return kv_.pool(); }
  int32_t block_size() const { return kv_.block_size(); }
  int32_t n_free() const { return kv_.pool().n_free(); }

  // Blocks needed for seq's K/V to cover tokens [0, n_computed + n): new blocks past its
  // table, plus one when the block that token n_computed goes into is shared (it is copied
  // before being written), plus the swapped-out blocks of a swapped sequence.
  int32_t blocks_needed(const Sequence& seq, int32_t n) const;
  // Most tokens (<= n) that seq can compute with the free blocks; 0 if none.
  int32_t tokens_that_fit(const Sequence& seq, int32_t n) const;
  bool can_allocate(const Sequence& seq, int32_t n) const {
    return blocks_needed(seq, n) <= n_free();
  }
  // Makes tokens [0, n_computed + n) writable and backed: swaps a swapped sequence back in,
  // copies a shared partial block, appends blocks. Requires can_allocate(seq, n).
  void allocate(Sequence& seq, int32_t n);

  // Drops seq's blocks (its table becomes empty).
  void free(Sequence& seq);
  // child gets parent's blocks (one more owner each); child's table must be empty.
  void share(const Sequence& parent, Sequence& child);
  // Copies seq's blocks to host memory and frees them; n_computed is kept. Returns false
  // (and does nothing) if that would exceed `host_limit` bytes swapped in all.
  bool swap_out(Sequence& seq, size_t host_limit);
  size_t swapped_bytes() const { return swapped_bytes_; }
  // Forgets a swapped sequence's host copy (it finished or was cancelled while swapped).
  void drop_swapped(Sequence& seq);

 private:
  int32_t held(const Sequence& seq) const;
  int32_t overhead(const Sequence& seq) const;

  PagedKVCache& kv_;
  size_t swapped_bytes_ = 0;
};

}  // namespace tokamak
