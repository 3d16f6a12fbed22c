#include "engine/block_manager.h"

#include <algorithm>
#include <cassert>

#include "core/error.h"
#include "engine/sequence.h"

namespace tokamak {
namespace {

int32_t blocks_for(int64_t tokens, int32_t block_size) {
  return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace

BlockManager::BlockManager(PagedKVCache& kv, bool prefix_caching, const KVTierOptions& tiers)
    : kv_(kv) {
  if (prefix_caching) prefix_ = std::make_unique<PrefixCache>(kv.pool(), kv.block_size());
  if (tiers.any()) {
    if (!prefix_) throw Error("KV tiers need the prefix cache");
    tiers_ = std::make_unique<KVTiers>(kv, tiers);
    // The evicted node's block still holds its K/V when the hook runs.
    prefix_->set_eviction_hook([this](const PrefixNode& node) {
      tiers_->store(node.key, node.parent->key, node.tokens, node.block);
    });
  }
}

// Blocks the table has (or will have back, for a swapped sequence).
int32_t BlockManager::held(const Sequence& seq) const {
  return seq.swapped() ? seq.n_swapped_blocks : static_cast<int32_t>(seq.block_table.size());
}

// Blocks needed before any new one: the swapped-out ones, or a copy of the shared block that
// the next token goes into.
int32_t BlockManager::overhead(const Sequence& seq) const {
  if (seq.swapped()) return seq.n_swapped_blocks;
  const size_t first = static_cast<size_t>(seq.n_computed / block_size());
  return first < seq.block_table.size() && pool().ref_count(seq.block_table[first]) > 1 ? 1 : 0;
}

int32_t BlockManager::blocks_needed(const Sequence& seq, int32_t n) const {
  if (n <= 0) return 0;
  const int32_t fresh =
      std::max(0, blocks_for(int64_t{seq.n_computed} + n, block_size()) - held(seq));
  return fresh + overhead(seq);
}

int32_t BlockManager::tokens_that_fit(const Sequence& seq, int32_t n) const {
  if (n <= 0) return 0;
  const int64_t room_blocks = int64_t{held(seq)} + n_available() - overhead(seq);
  const int64_t fit = room_blocks * block_size() - seq.n_computed;
  return static_cast<int32_t>(std::clamp<int64_t>(fit, 0, n));
}

void BlockManager::allocate(Sequence& seq, int32_t n) {
  assert(can_allocate(seq, n));
  BlockPool& pool = kv_.pool();
  const int32_t bs = block_size();
  // Cached blocks nobody uses give way, least recently used first, when the free list is
  // short (never before: they may serve a later request).
  const int32_t short_by = blocks_needed(seq, n) - pool.n_free();
  if (short_by > 0 && prefix_) {
    const int32_t evicted = prefix_->evict(short_by);
    assert(evicted == short_by);
    (void)evicted;
  }
  if (seq.swapped()) {
    assert(seq.n_swapped_cached == 0 && "its cached blocks come back through swap_in()");
    [[maybe_unused]] const int32_t lost = swap_in(seq);
    assert(lost == 0);
  }
  const size_t first = static_cast<size_t>(seq.n_computed / bs);
  if (n > 0 && first < seq.block_table.size() && pool.ref_count(seq.block_table[first]) > 1) {
    // Copy-on-write: this sequence is about to write into a block others still read.
    const int32_t shared = seq.block_table[first];
    const int32_t copy = *pool.allocate();
    kv_.copy_block(shared, copy);
    pool.release(shared);
    seq.block_table[first] = copy;
  }
  const int32_t need = blocks_for(int64_t{seq.n_computed} + n, bs);
  const int32_t fresh = need - static_cast<int32_t>(seq.block_table.size());
  if (fresh > 0) {
    const bool ok = pool.allocate(fresh, seq.block_table);
    assert(ok);
    (void)ok;
  }
  if (kv_.hot() != nullptr && n > 0) cover_hot(seq, (seq.n_computed + n - 1) / bs);
}

int32_t BlockManager::hot_blocks_needed(int32_t window_blocks, int32_t block_size,
                                        int32_t max_seqs, int32_t max_batched_tokens) {
  return max_seqs * (window_blocks + 2) + blocks_for(max_batched_tokens, block_size);
}

int32_t BlockManager::first_hot_entry(const Sequence& seq) const {
  return std::max(0, seq.n_computed / block_size() - kv_.hot_window_blocks() + 1);
}

size_t BlockManager::stale_hot_copies(const Sequence& seq) const {
  return static_cast<size_t>(std::clamp(first_hot_entry(seq) - seq.hot_first, 0,
                                        static_cast<int32_t>(seq.hot_table.size())));
}

void BlockManager::cover_hot(Sequence& seq, int32_t hi) {
  // Entries before lo are read from the main pool by every later query: their copies go.
  trim_hot(seq);
  const int32_t lo = first_hot_entry(seq);
  assert(lo <= hi);
  if (seq.hot_table.empty()) seq.hot_first = lo;
  // The rows computed in [lo, n_computed) must be here already: a hot copy cannot be made
  // afterwards (the main pool holds them encoded). match_prefix and swaps keep that so.
  assert(seq.hot_first <= lo || seq.n_computed <= lo * block_size());
  const int32_t end = seq.hot_first + static_cast<int32_t>(seq.hot_table.size());
  if (hi >= end) {
    [[maybe_unused]] const bool ok = kv_.hot()->pool().allocate(hi - end + 1, seq.hot_table);
    assert(ok && "the hot cache is sized for every running sequence");
  }
}

size_t BlockManager::swapped_size(int32_t blocks, int32_t hot_blocks) const {
  return size_t(blocks) * kv_.shape().bytes_per_block() +
         (hot_blocks > 0 ? size_t(hot_blocks) * kv_.hot()->shape().bytes_per_block() : 0);
}

size_t BlockManager::swapped_size(const Sequence& seq) const {
  return swapped_size(seq.n_swapped_blocks - seq.n_swapped_cached, seq.n_swapped_hot);
}

void BlockManager::trim_hot(Sequence& seq) {
  if (kv_.hot() == nullptr || seq.hot_table.empty()) return;
  const size_t stale = stale_hot_copies(seq);
  kv_.hot()->pool().release(std::span(seq.hot_table).first(stale));
  seq.hot_table.erase(seq.hot_table.begin(),
                      seq.hot_table.begin() + static_cast<ptrdiff_t>(stale));
  seq.hot_first += static_cast<int32_t>(stale);
}

void BlockManager::release_hot(Sequence& seq) {
  if (kv_.hot() == nullptr) return;
  kv_.hot()->pool().release(seq.hot_table);
  seq.hot_table.clear();
  seq.hot_first = 0;
}

std::optional<int32_t> BlockManager::match_prefix(Sequence& seq) {
  if (!prefix_ || seq.n_computed != 0 || seq.swapped() || !seq.block_table.empty()) {
    return std::nullopt;
  }
  assert(seq.cache_node == nullptr);
  const int32_t bs = block_size();
  seq.cache_node = prefix_->match(seq.tokens, seq.num_tokens() / bs, seq.block_table);
  for (int32_t b : seq.block_table) kv_.pool().retain(b);
  if (tiers_) extend_from_tiers(seq, seq.num_tokens() / bs);
  seq.n_cached_blocks = static_cast<int32_t>(seq.block_table.size());
  if (kv_.hot() != nullptr) {
    // Restart at a block boundary, the whole last block recomputed when every token is
    // cached: the rows before a query in its own block must be in its hot copy.
    const int32_t usable = std::min(seq.n_cached_blocks, (seq.num_tokens() - 1) / bs);
    drop_blocks(seq, usable, seq.n_cached_blocks - usable);
    seq.n_computed = usable * bs;
    return seq.n_computed;
  }
  seq.n_computed = std::min(seq.n_cached_blocks * bs, seq.num_tokens() - 1);
  return seq.n_computed;
}

void BlockManager::extend_from_tiers(Sequence& seq, int32_t max_blocks) {
  BlockPool& pool = kv_.pool();
  const size_t bs = static_cast<size_t>(block_size());
  PrefixNode* node = seq.cache_node;  // locked by match(); the root when nothing matched
  for (size_t i = seq.block_table.size(); i < static_cast<size_t>(max_blocks); ++i) {
    const auto tokens = std::span(seq.tokens).subspan(i * bs, bs);
    const BlockKey key = chain_block_key(node->key, tokens);
    if (!tiers_->contains(key)) break;
    // A block to copy into: a free one, else the least recently used cached one (which goes
    // down a tier itself; the path matched so far is locked and stays).
    if (pool.n_free() == 0 && prefix_->evict(1) == 0) break;
    const int32_t block = *pool.allocate();  // seq's reference
    if (!tiers_->load(key, node->key, tokens, block)) {
      pool.release(block);  // gone meanwhile (pushed out by that eviction) or rejected
      break;
    }
    PrefixNode* child = prefix_->insert(node, tokens, block);  // the cache's reference
    assert(child->block == block);
    // Move the lock down before anything can evict the new, unlocked leaf.
    prefix_->lock(child);
    prefix_->unlock(node);
    node = child;
    seq.block_table.push_back(block);
  }
  seq.cache_node = node;
}

void BlockManager::cache_full_blocks(Sequence& seq) {
  // After a KV window dropped tokens, the K/V left were computed with context that is gone:
  // they are not what these tokens would give from the start, so they must never be shared.
  if (!prefix_ || seq.n_evicted > 0) return;
  const int32_t bs = block_size();
  const int32_t full = seq.n_computed / bs;
  if (full <= seq.n_cached_blocks) return;
  assert(static_cast<size_t>(full) <= seq.block_table.size());
  BlockPool& pool = kv_.pool();
  PrefixNode* node = seq.cache_node ? seq.cache_node : prefix_->root();
  for (int32_t i = seq.n_cached_blocks; i < full; ++i) {
    int32_t& own = seq.block_table[static_cast<size_t>(i)];
    node = prefix_->insert(node, std::span(seq.tokens).subspan(size_t(i) * size_t(bs), size_t(bs)),
                           own);
    if (node->block != own) {
      pool.retain(node->block);
      pool.release(own);
      own = node->block;
    }
  }
  prefix_->lock(node);
  drop_lock(seq);
  seq.cache_node = node;
  seq.n_cached_blocks = full;
}

void BlockManager::clear_prefix_cache() {
  if (prefix_) prefix_->clear();
}

void BlockManager::drop_lock(Sequence& seq) {
  if (seq.cache_node != nullptr) prefix_->unlock(seq.cache_node);
  seq.cache_node = nullptr;
  seq.n_cached_blocks = 0;
}

void BlockManager::free(Sequence& seq) {
  kv_.pool().release(seq.block_table);
  seq.block_table.clear();
  seq.block_mass.clear();
  release_hot(seq);
  drop_lock(seq);
  drop_swapped(seq);
}

bool BlockManager::make_block_exclusive(Sequence& seq, int32_t index) {
  assert(index >= 0 && static_cast<size_t>(index) < seq.block_table.size());
  BlockPool& pool = kv_.pool();
  int32_t& block = seq.block_table[static_cast<size_t>(index)];
  if (pool.ref_count(block) == 1) return true;
  if (n_available() < 1) return false;
  if (pool.n_free() < 1) prefix_->evict(1);
  const int32_t copy = *pool.allocate();
  kv_.copy_block(block, copy);
  pool.release(block);
  block = copy;
  return true;
}

void BlockManager::drop_blocks(Sequence& seq, int32_t first, int32_t count) {
  assert(first >= 0 && count >= 0 && size_t(first) + size_t(count) <= seq.block_table.size());
  if (count == 0) return;
  const auto begin = seq.block_table.begin() + first;
  kv_.pool().release(std::span<const int32_t>(&*begin, static_cast<size_t>(count)));
  seq.block_table.erase(begin, begin + count);
  // The table still follows the cached path for its first `first` blocks at most: the lock
  // moves up to that node (a cached block seq still holds must stay locked).
  if (prefix_ && seq.cache_node != nullptr && seq.n_cached_blocks > first) {
    PrefixNode* keep = seq.cache_node;
    int32_t depth = seq.n_cached_blocks;
    for (; depth > first; --depth) keep = keep->parent;
    if (depth > 0) prefix_->lock(keep);
    prefix_->unlock(seq.cache_node);
    seq.cache_node = depth > 0 ? keep : nullptr;
    seq.n_cached_blocks = depth;
  }
}

void BlockManager::share(const Sequence& parent, Sequence& child) {
  assert(child.block_table.empty());
  for (int32_t b : parent.block_table) kv_.pool().retain(b);
  child.block_table = parent.block_table;
  child.block_mass = parent.block_mass;
  // Hot copies are written (the block being filled): the child gets its own, of the entries
  // its next queries read hot (the parent may hold more until its next step).
  if (kv_.hot() != nullptr && !parent.hot_table.empty()) {
    assert(child.n_computed == parent.n_computed);
    const size_t skip = stale_hot_copies(parent);
    const auto n = static_cast<int32_t>(parent.hot_table.size() - skip);
    [[maybe_unused]] const bool ok = kv_.hot()->pool().allocate(n, child.hot_table);
    assert(ok && "the hot cache is sized for every running sequence");
    for (size_t i = 0; i < child.hot_table.size(); ++i) {
      kv_.hot()->copy_block(parent.hot_table[skip + i], child.hot_table[i]);
    }
    child.hot_first = parent.hot_first + static_cast<int32_t>(skip);
  }
  // The child uses the parent's cached blocks too: it holds its own lock on them.
  if (parent.cache_node != nullptr) prefix_->lock(parent.cache_node);
  child.cache_node = parent.cache_node;
  child.n_cached_blocks = parent.n_cached_blocks;
}

bool BlockManager::swap_out(Sequence& seq, size_t host_limit) {
  assert(!seq.swapped());
  const int32_t bs = block_size();
  // Only the blocks that hold computed tokens: any allocated for this step are just freed.
  const int32_t keep = blocks_for(seq.n_computed, bs);
  // With tiers, the full ones go to the prefix cache (unless a KV window cut this K/V,
  // which must never be shared): blocks other sequences also use stay where they are, and
  // the rest leave the pool only if it needs the room, down the tiers.
  const int32_t cached = tiers_ != nullptr && seq.n_evicted == 0 ? seq.n_computed / bs : 0;
  // The hot copies of entries holding computed rows come along (the one being filled
  // exists nowhere else); those allocated for this step are just freed.
  const int32_t hot_keep =
      kv_.hot() == nullptr
          ? 0
          : std::clamp(keep - seq.hot_first, 0, static_cast<int32_t>(seq.hot_table.size()));
  const size_t bytes = swapped_size(keep - cached, hot_keep);
  if (tiers_ && tiers_->has_host()) {
    if (!tiers_->reserve_host(bytes)) return false;
  } else if (swapped_bytes_ + bytes > host_limit) {
    return false;
  }
  if (cached > 0) {
    cache_full_blocks(seq);
    assert(seq.n_cached_blocks == cached);
  }
  seq.swapped_kv.clear();
  kv_.save_blocks(std::span(seq.block_table).subspan(size_t(cached), size_t(keep - cached)),
                  seq.swapped_kv);
  kv_.pool().release(seq.block_table);
  seq.block_table.clear();
  if (kv_.hot() != nullptr) {
    kv_.hot()->save_blocks(std::span(seq.hot_table).first(static_cast<size_t>(hot_keep)),
                           seq.swapped_kv);
    seq.n_swapped_hot = hot_keep;
    seq.swapped_hot_first = seq.hot_first;
    release_hot(seq);
  }
  // Its cached blocks are now evictable; swap_in() locks what it matches again.
  drop_lock(seq);
  seq.n_swapped_blocks = keep;
  seq.n_swapped_cached = cached;
  swapped_bytes_ += bytes;
  return true;
}

int32_t BlockManager::swap_in(Sequence& seq) {
  assert(seq.swapped() && seq.block_table.empty() && seq.hot_table.empty());
  assert(can_allocate(seq, 1));
  BlockPool& pool = kv_.pool();
  if (seq.n_swapped_cached > 0) {
    // The same lookup as a new request's, limited to the blocks it left to the cache.
    seq.cache_node = prefix_->match(seq.tokens, seq.n_swapped_cached, seq.block_table);
    for (int32_t b : seq.block_table) pool.retain(b);
    extend_from_tiers(seq, seq.n_swapped_cached);
    seq.n_cached_blocks = static_cast<int32_t>(seq.block_table.size());
    if (seq.n_cached_blocks < seq.n_swapped_cached) {
      // A tier dropped (or rejected) one: resume from the blocks found. A block boundary,
      // so a hot window has nothing computed to miss.
      const int32_t kept = seq.n_cached_blocks * block_size();
      const int32_t lost = seq.n_computed - kept;
      seq.n_computed = kept;
      if (seq.block_mass.size() > seq.block_table.size()) {
        seq.block_mass.resize(seq.block_table.size());
      }
      if (seq.n_cached_blocks == 0) drop_lock(seq);  // holds the root: a fresh sequence
      drop_swapped(seq);
      return lost;
    }
  }
  const int32_t copied = seq.n_swapped_blocks - seq.n_swapped_cached;
  if (prefix_ && pool.n_free() < copied) prefix_->evict(copied - pool.n_free());
  const size_t first = seq.block_table.size();
  [[maybe_unused]] const bool ok = pool.allocate(copied, seq.block_table);
  assert(ok);
  const size_t main_bytes = size_t(copied) * kv_.shape().bytes_per_block();
  kv_.load_blocks(std::span(seq.block_table).subspan(first),
                  std::span(seq.swapped_kv).first(main_bytes));
  if (seq.n_swapped_hot > 0) {
    [[maybe_unused]] const bool hot_ok =
        kv_.hot()->pool().allocate(seq.n_swapped_hot, seq.hot_table);
    assert(hot_ok);
    seq.hot_first = seq.swapped_hot_first;
    kv_.hot()->load_blocks(seq.hot_table, std::span(seq.swapped_kv).subspan(main_bytes));
  }
  drop_swapped(seq);
  return 0;
}

void BlockManager::drop_swapped(Sequence& seq) {
  if (seq.n_swapped_blocks == 0) return;
  const size_t bytes = swapped_size(seq);
  swapped_bytes_ -= bytes;
  if (tiers_ && tiers_->has_host()) tiers_->unreserve_host(bytes);
  seq.n_swapped_blocks = 0;
  seq.n_swapped_cached = 0;
  seq.n_swapped_hot = 0;
  seq.swapped_kv.clear();
  seq.swapped_kv.shrink_to_fit();
}

}  // namespace tokamak
