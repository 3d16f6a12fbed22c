#pragma once
// BlockManager: a sequence's KV blocks — allocating them for the tokens a step will compute,
// copy-on-write of a shared block before it is written, sharing a parent's blocks with a
// forked sample, freeing, and swapping to host memory and back, and (when on) the prefix
// cache: matching a new sequence's cached prefix and caching its blocks as they fill. The
// scheduler asks it "can this sequence compute n more tokens?" and it answers from the pool
// without side effects; allocate() then cannot fail.
//
// With the prefix cache, blocks are free, held by sequences, or cached with no sequence
// using them (evictable). The last kind counts as available: allocate() evicts the least
// recently used of them when the free list runs short, so the scheduler preempts only when
// eviction cannot make room. References: every table entry is one pool reference; the
// cache holds one more on each block it names (see kv/prefix_cache.h); a sequence using
// cached blocks locks its deepest cached node.
//
// With KV tiers (kv/kv_tiers.h), a cached block the pool evicts is copied down to host
// memory (then disk) first, and match_prefix continues a pool match block by block in the
// tiers: each hit takes a pool block, is copied into it and joins the radix tree as if it
// had been computed. Swap preemption then takes the same path: a swapped sequence's full
// blocks are left to the prefix cache (unlocked, so the pool evicts them down the tiers
// when it needs room, like any cached block), and only its partly filled last block and
// hot copies are copied to host memory, charged to the host tier's budget (one bound on
// host memory for both). swap_in() matches them back, pool first, then the tiers; if a
// tier dropped one meanwhile the sequence recomputes from the blocks found, as a
// recompute-preempted one would.
//
// With a hot window (PagedKVCache::hot()), a sequence also holds F16 copies of its newest
// table entries (Sequence::hot_table): allocate() makes them cover every entry the step's
// queries read hot, [n_computed / bs - window + 1, (n_computed + n - 1) / bs], and gives
// back those before; forks copy them, swaps carry them, free() returns them. The hot cache
// is sized for every running sequence at once (hot_blocks_needed), so this never fails. A
// prefix match then always restarts at a block boundary with nothing computed hot (only a
// one-block window can reuse a cached prefix exactly: a wider one would need hot copies of
// cached blocks, which the main pool holds only encoded).

#include <cstdint>
#include <memory>
#include <optional>

#include "kv/kv_tiers.h"
#include "kv/paged_kv_cache.h"
#include "kv/prefix_cache.h"

namespace tokamak {

struct Sequence;

class BlockManager {
 public:
  // Tiers need the prefix cache (they hold what it evicts); throws Error like KVTiers.
  explicit BlockManager(PagedKVCache& kv, bool prefix_caching = false,
                        const KVTierOptions& tiers = {});

  PagedKVCache& cache() { return kv_; }
  const BlockPool& pool() const { return kv_.pool(); }
  int32_t block_size() const { return kv_.block_size(); }
  // Blocks that can be handed out: free ones and cached ones no sequence uses.
  int32_t n_available() const {
    return kv_.pool().n_free() + (prefix_ ? prefix_->n_evictable() : 0);
  }
  // Null when prefix caching is off.
  PrefixCache* prefix_cache() { return prefix_.get(); }
  const PrefixCache* prefix_cache() const { return prefix_.get(); }
  // Null when no tier is configured.
  KVTiers* tiers() { return tiers_.get(); }
  const KVTiers* tiers() const { return tiers_.get(); }

  // Blocks needed for seq's K/V to cover tokens [0, n_computed + n): new blocks past its
  // table, plus one when the block that token n_computed goes into is shared (it is copied
  // before being written), plus the swapped-out blocks of a swapped sequence.
  int32_t blocks_needed(const Sequence& seq, int32_t n) const;
  // Most tokens (<= n) that seq can compute with the free blocks; 0 if none.
  int32_t tokens_that_fit(const Sequence& seq, int32_t n) const;
  bool can_allocate(const Sequence& seq, int32_t n) const {
    return blocks_needed(seq, n) <= n_available();
  }
  // Makes tokens [0, n_computed + n) writable and backed: swaps a swapped sequence back in
  // (one whose full blocks went to the prefix cache must come back through swap_in()
  // first), copies a shared partial block, appends blocks. Requires can_allocate(seq, n).
  void allocate(Sequence& seq, int32_t n);

  // Starts a sequence with no K/V (n_computed 0, empty table, not swapped) at its longest
  // cached prefix: the cached blocks head its table and n_computed skips them, leaving at
  // least the last token to compute (for its logits; when every token is cached that
  // token's block is shared and allocate() copies it before writing). Past the pool's
  // match, blocks found in the tiers are copied into pool blocks (free ones, or evicted
  // cached ones) and cached. Returns the tokens reused, or nullopt when no lookup was made
  // (prefix caching off, or seq not fresh).
  // free() undoes it.
  std::optional<int32_t> match_prefix(Sequence& seq);
  // Caches seq's full blocks of computed tokens that are not cached yet, moving its lock to
  // the deepest. A block the cache already has under the same tokens replaces seq's own
  // copy (same K/V: kernels are batch-invariant), so no content is cached twice.
  void cache_full_blocks(Sequence& seq);
  // Gives back seq's hot copies that no later query reads (entries before
  // n_computed / block_size - window + 1); allocate() does it too.
  void trim_hot(Sequence& seq);
  // Hot blocks a hot window of window_blocks needs so that max_seqs sequences can run steps
  // of max_batched_tokens tokens in all: per sequence the window, the block being filled
  // and one that a step's first token may start; plus every block the step's tokens fill.
  static int32_t hot_blocks_needed(int32_t window_blocks, int32_t block_size, int32_t max_seqs,
                                   int32_t max_batched_tokens);

  // Drops every cached block no sequence uses (tests; memory hand-back).
  void clear_prefix_cache();

  // Drops seq's blocks (its table becomes empty) and its prefix-cache lock; its cached
  // blocks stay cached until evicted.
  void free(Sequence& seq);
  // The KV window (engine/kv_window.h): gives seq its own copy of table entry `index` when
  // others share it (false, with nothing changed, when no block is available), and drops
  // `count` entries from `first` on (seq's prefix-cache lock moves up to cover at most its
  // first `first` blocks, the part of its table that still follows a cached path).
  bool make_block_exclusive(Sequence& seq, int32_t index);
  void drop_blocks(Sequence& seq, int32_t first, int32_t count);
  // child gets parent's blocks (one more owner each); child's table must be empty.
  void share(const Sequence& parent, Sequence& child);
  // Copies seq's blocks to host memory and frees them; n_computed is kept. With tiers (and
  // K/V a KV window has not cut, which must never be shared) its full blocks go to the
  // prefix cache instead and only the rest is copied. Returns false (and does nothing) if
  // the copy would exceed `host_limit` bytes swapped in all, or, with a host tier, if it
  // does not fit in the host tier's budget (host_limit is then unused: cached entries make
  // room, swapped bytes never do).
  bool swap_out(Sequence& seq, size_t host_limit);
  // Brings a swapped sequence's K/V back into the pool (and its hot copies into the hot
  // cache): the blocks left to the prefix cache are matched there and in the tiers, the
  // rest are loaded from host memory. Requires can_allocate(seq, 1). Returns the computed
  // tokens lost: when a tier dropped one of its blocks meanwhile, n_computed falls back to
  // the blocks found (its host copy is dropped) and the rest is computed again.
  int32_t swap_in(Sequence& seq);
  size_t swapped_bytes() const { return swapped_bytes_; }
  // Forgets a swapped sequence's host copy (it finished or was cancelled while swapped).
  void drop_swapped(Sequence& seq);

 private:
  int32_t held(const Sequence& seq) const;
  int32_t overhead(const Sequence& seq) const;
  void drop_lock(Sequence& seq);
  // Hot window: makes seq's hot copies cover the entries its next queries read hot, up to
  // entry hi (giving back those before), and gives every copy back.
  void cover_hot(Sequence& seq, int32_t hi);
  void release_hot(Sequence& seq);
  // The first table entry that seq's next query (at position n_computed), and every later
  // one, reads hot; and how many of seq's hot copies are of entries before it (stale).
  int32_t first_hot_entry(const Sequence& seq) const;
  size_t stale_hot_copies(const Sequence& seq) const;
  // Host bytes of a swapped sequence's copied blocks and hot copies.
  size_t swapped_size(int32_t blocks, int32_t hot_blocks) const;
  size_t swapped_size(const Sequence& seq) const;
  // Extends seq's fresh pool match (its table, its locked cache_node) with tier hits, up to
  // max_blocks blocks in all.
  void extend_from_tiers(Sequence& seq, int32_t max_blocks);

  PagedKVCache& kv_;
  std::unique_ptr<PrefixCache> prefix_;
  std::unique_ptr<KVTiers> tiers_;
  size_t swapped_bytes_ = 0;
};

}  // namespace tokamak
