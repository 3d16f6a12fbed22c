#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>

namespace tokamak {

// free_ is a heap under std::greater, so its front is the lowest free id.

BlockPool::BlockPool(int32_t n_blocks) : ref_counts_(static_cast<size_t>(n_blocks), 0) {
  assert(n_blocks >= 1);
  // Ascending ids already satisfy the min-heap property.
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = 0; b < n_blocks; ++b) free_.push_back(b);
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  std::pop_heap(free_.begin(), free_.end(), std::greater<>());
  int32_t block = free_.back();
  free_.pop_back();
  assert(ref_counts_[static_cast<size_t>(block)] == 0);
  ref_counts_[static_cast<size_t>(block)] = 1;
  peak_used_ = std::max(peak_used_, n_used());
  return block;
}

bool BlockPool::allocate(int32_t n, std::vector<int32_t>& out) {
  assert(n >= 0);
  if (n > n_free()) return false;
  out.reserve(out.size() + static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) out.push_back(*allocate());
  return true;
}

void BlockPool::retain(int32_t block) {
  assert(block >= 0 && block < n_blocks());
  int32_t& count = ref_counts_[static_cast<size_t>(block)];
  assert(count > 0 && "retain of a free block");
  assert(count < std::numeric_limits<int32_t>::max());
  ++count;
}

void BlockPool::release(int32_t block) {
  assert(block >= 0 && block < n_blocks());
  int32_t& count = ref_counts_[static_cast<size_t>(block)];
  assert(count > 0 && "release of a free block");
  if (--count > 0) return;
  free_.push_back(block);
  std::push_heap(free_.begin(), free_.end(), std::greater<>());
}

void BlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t block : blocks) release(block);
}

int32_t BlockPool::ref_count(int32_t block) const {
  assert(block >= 0 && block < n_blocks());
  return ref_counts_[static_cast<size_t>(block)];
}

}  // namespace tokamak
