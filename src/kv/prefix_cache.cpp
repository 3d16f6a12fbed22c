#include "kv/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace tokamak {

// Invariants (checked by the tests through the public counts):
//   - every non-root node names a distinct block, and the cache holds one pool reference
//     on it; by_block_ maps the block back to the node;
//   - a node's lock = the locks taken on it or on any descendant, so lock == 0 on a node
//     implies lock == 0 on its whole subtree;
//   - leaves_ holds exactly the non-root nodes with lock == 0 and no children, keyed by
//     (last_access, node); keys are unique because every touch takes a new tick.

PrefixCache::PrefixCache(BlockPool& pool, int32_t block_size)
    : pool_(pool), block_size_(block_size), by_block_(static_cast<size_t>(pool.n_blocks())) {
  assert(block_size >= 1);
}

PrefixCache::~PrefixCache() {
  // The pool may outlive the cache: give back the references it holds.
  for (size_t b = 0; b < by_block_.size(); ++b) {
    if (by_block_[b] != nullptr) pool_.release(static_cast<int32_t>(b));
  }
}

uint64_t PrefixCache::block_hash(std::span<const int32_t> tokens) const {
  // FNV-1a over the ids, then a final mix; collisions are resolved by comparing tokens.
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t t : tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

PrefixNode* PrefixCache::find_child(const PrefixNode* parent, std::span<const int32_t> tokens,
                                    uint64_t hash) const {
  auto [first, last] = parent->children.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const std::vector<int32_t>& t = it->second->tokens;
    if (std::equal(t.begin(), t.end(), tokens.begin(), tokens.end())) return it->second.get();
  }
  return nullptr;
}

void PrefixCache::update_leaf(PrefixNode* node) {
  if (node == &root_) return;
  if (node->lock == 0 && node->children.empty()) {
    leaves_.emplace(node->last_access, node);
  } else {
    leaves_.erase({node->last_access, node});
  }
}

void PrefixCache::touch(PrefixNode* node) {
  leaves_.erase({node->last_access, node});
  node->last_access = ++tick_;
  update_leaf(node);
}

PrefixNode* PrefixCache::match(std::span<const int32_t> tokens, int32_t max_blocks,
                               std::vector<int32_t>& blocks) {
  PrefixNode* node = &root_;
  const size_t bs = static_cast<size_t>(block_size_);
  for (int32_t i = 0; i < max_blocks && (static_cast<size_t>(i) + 1) * bs <= tokens.size(); ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    PrefixNode* child = find_child(node, block_tokens, block_hash(block_tokens));
    if (child == nullptr) break;
    touch(child);
    blocks.push_back(child->block);
    node = child;
  }
  lock(node);
  return node;
}

int32_t PrefixCache::peek(std::span<const int32_t> tokens) const {
  const PrefixNode* node = &root_;
  const size_t bs = static_cast<size_t>(block_size_);
  int32_t n = 0;
  while ((static_cast<size_t>(n) + 1) * bs <= tokens.size()) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(n) * bs, bs);
    node = find_child(node, block_tokens, block_hash(block_tokens));
    if (node == nullptr) break;
    ++n;
  }
  return n;
}

PrefixNode* PrefixCache::insert(PrefixNode* parent, std::span<const int32_t> tokens,
                                int32_t block) {
  assert(parent != nullptr);
  assert(tokens.size() == static_cast<size_t>(block_size_));
  const uint64_t hash = block_hash(tokens);
  if (PrefixNode* existing = find_child(parent, tokens, hash)) {
    touch(existing);
    return existing;
  }
  assert(block >= 0 && static_cast<size_t>(block) < by_block_.size());
  assert(by_block_[static_cast<size_t>(block)] == nullptr && "a block cached twice");
  auto node = std::make_unique<PrefixNode>();
  node->tokens.assign(tokens.begin(), tokens.end());
  node->block = block;
  node->hash = hash;
  node->key = chain_block_key(parent->key, tokens);
  node->parent = parent;
  node->last_access = ++tick_;
  PrefixNode* raw = node.get();
  pool_.retain(block);
  by_block_[static_cast<size_t>(block)] = raw;
  parent->children.emplace(hash, std::move(node));
  update_leaf(parent);  // no longer a leaf
  ++n_cached_;
  ++n_evictable_;
  update_leaf(raw);
  return raw;
}

void PrefixCache::lock(PrefixNode* node) {
  for (PrefixNode* n = node; n != &root_; n = n->parent) {
    if (n->lock++ == 0) {
      --n_evictable_;
      update_leaf(n);
    }
  }
}

void PrefixCache::unlock(PrefixNode* node) {
  for (PrefixNode* n = node; n != &root_; n = n->parent) {
    assert(n->lock > 0 && "unlock without a lock");
    if (--n->lock == 0) {
      ++n_evictable_;
      update_leaf(n);
    }
  }
}

void PrefixCache::remove(PrefixNode* node) {
  assert(node != &root_ && node->lock == 0 && node->children.empty());
  if (on_evict_) on_evict_(*node);
  leaves_.erase({node->last_access, node});
  const int32_t block = node->block;
  PrefixNode* parent = node->parent;
  by_block_[static_cast<size_t>(block)] = nullptr;
  auto [first, last] = parent->children.equal_range(node->hash);
  for (auto it = first; it != last; ++it) {
    if (it->second.get() == node) {
      parent->children.erase(it);  // destroys node
      break;
    }
  }
  // An unlocked node is used by no sequence, so the cache held the only reference.
  assert(pool_.ref_count(block) == 1);
  pool_.release(block);
  --n_cached_;
  --n_evictable_;
  update_leaf(parent);  // may have become an unlocked leaf
}

int32_t PrefixCache::evict(int32_t n) {
  int32_t freed = 0;
  while (freed < n && !leaves_.empty()) {
    remove(leaves_.begin()->second);
    ++freed;
  }
  return freed;
}

bool PrefixCache::evictable(int32_t block) const {
  const PrefixNode* node = by_block_[static_cast<size_t>(block)];
  return node != nullptr && node->lock == 0;
}

}  // namespace tokamak
