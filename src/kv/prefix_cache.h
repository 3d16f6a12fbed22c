#pragma once
// PrefixCache: a radix tree over token ids, one node per full KV block, that lets a new
// sequence start from the K/V another sequence already computed for the same leading tokens
// (a system prompt, the earlier turns of a chat, few-shot examples, the prompt of n > 1
// samples, a preempted sequence's own prefix).
//
//   root ─ [t0..t15 | b4] ─ [t16..t31 | b9] ─┬─ [t32..t47 | b2]      (one system prompt,
//                                            └─ [t32..t47 | b7]       two questions)
//
// A node is one full block: its block_size token ids and the pool block holding their K/V
// (given the node's ancestors as the preceding tokens). Nodes hold block ids, never K/V.
// Children are found by a hash of the block's tokens and confirmed by comparing the tokens,
// so a hash collision can never serve wrong K/V.
//
// Ownership: the cache holds one BlockPool reference on every block it names (taken by
// insert, given back by evict/clear). A sequence that uses a cached block holds its own
// reference too, and a lock on the deepest node of the cached prefix it uses; locks count
// on every node from there to the root. A node with lock count 0 is used by no sequence: it
// and its whole subtree are evictable, and evicting it frees its block (the cache's was the
// only reference). Eviction takes unlocked leaves, least recently used first, and only when
// asked (the block manager asks when the pool has no free block left).
//
// Every node also carries its BlockKey (kv/block_key.h), the chained SHA-256 of the tokens
// from the root to it: what names the block in the host and disk tiers. An eviction hook,
// when set, sees each node just before it is removed (its block still holds its K/V), so
// the block can be copied down a tier.
//
// Plain bookkeeping on a BlockPool, testable with no KV memory or model behind it.

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/block_key.h"
#include "kv/block_pool.h"

namespace tokamak {

struct PrefixNode {
  std::vector<int32_t> tokens;   // (block_size) the block's token ids; empty for the root
  int32_t block = 0;             // pool block id; unused for the root
  uint64_t hash = 0;             // of `tokens`
  BlockKey key = kRootBlockKey;  // chain_block_key(parent->key, tokens); zeros for the root
  PrefixNode* parent = nullptr;
  std::unordered_multimap<uint64_t, std::unique_ptr<PrefixNode>> children;  // by hash
  int32_t lock = 0;          // sequences using this node or a descendant
  uint64_t last_access = 0;  // tick of the last match or insert through it (LRU)
};

class PrefixCache {
 public:
  PrefixCache(BlockPool& pool, int32_t block_size);  // block_size >= 1
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t block_size() const { return block_size_; }
  // The root: no block; a sequence with nothing cached yet inserts its first block under it.
  PrefixNode* root() { return &root_; }
  const PrefixNode* root() const { return &root_; }

  // The longest cached prefix of `tokens` in full blocks, at most max_blocks of them: its
  // blocks, root first, appended to `blocks`, and its deepest node (the root when nothing
  // matched), now locked. The caller takes its own pool references on the blocks it keeps.
  PrefixNode* match(std::span<const int32_t> tokens, int32_t max_blocks,
                    std::vector<int32_t>& blocks);
  // Blocks match() would find, without locking or touching anything (for scheduling).
  int32_t peek(std::span<const int32_t> tokens) const;

  // The child of `parent` for the full block `tokens` (block_size ids): the cached one if
  // there is one, else a new node naming `block` (the cache takes a pool reference on it).
  // Neither locks nor unlocks; the caller moves its lock to the deepest node it reached.
  PrefixNode* insert(PrefixNode* parent, std::span<const int32_t> tokens, int32_t block);

  // Locks / unlocks node and every ancestor. Locking the root is allowed and does nothing.
  void lock(PrefixNode* node);
  void unlock(PrefixNode* node);

  // Frees up to n unlocked blocks, least recently used leaves first; returns how many.
  // The eviction hook, if set, sees each node first.
  int32_t evict(int32_t n);
  using EvictionHook = std::function<void(const PrefixNode&)>;
  void set_eviction_hook(EvictionHook hook) { on_evict_ = std::move(hook); }
  // Frees every unlocked block (locked ones stay).
  void clear() { evict(n_cached_); }

  int32_t n_cached() const { return n_cached_; }        // blocks in the tree
  int32_t n_evictable() const { return n_evictable_; }  // of them, unlocked
  // Whether `block` is in the tree, and unlocked (for the dashboard's block map).
  bool cached(int32_t block) const { return by_block_[static_cast<size_t>(block)] != nullptr; }
  bool evictable(int32_t block) const;

 private:
  uint64_t block_hash(std::span<const int32_t> tokens) const;
  PrefixNode* find_child(const PrefixNode* parent, std::span<const int32_t> tokens,
                         uint64_t hash) const;
  // Keeps `leaves_` holding exactly the unlocked leaves (call after any change to node).
  void update_leaf(PrefixNode* node);
  void touch(PrefixNode* node);
  void remove(PrefixNode* node);

  BlockPool& pool_;
  int32_t block_size_;
  EvictionHook on_evict_;
  PrefixNode root_;
  std::vector<PrefixNode*> by_block_;  // (n_blocks) the node naming each block, or null
  std::set<std::pair<uint64_t, PrefixNode*>> leaves_;  // unlocked leaves by last_access
  uint64_t tick_ = 0;
  int32_t n_cached_ = 0;
  int32_t n_evictable_ = 0;
};

}  // namespace tokamak
