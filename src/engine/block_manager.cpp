#include "engine/block_manager.h"

#include <algorithm>
#include <cassert>

#include "engine/sequence.h"

namespace tokamak {
namespace {

int32_t blocks_for(int64_t tokens, int32_t block_size) {
  return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace

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
  const int64_t room_blocks = int64_t{held(seq)} + n_free() - overhead(seq);
  const int64_t fit = room_blocks * block_size() - seq.n_computed;
  return static_cast<int32_t>(std::clamp<int64_t>(fit, 0, n));
}

void BlockManager::allocate(Sequence& seq, int32_t n) {
  assert(can_allocate(seq, n));
  BlockPool& pool = kv_.pool();
  const int32_t bs = block_size();
  if (seq.swapped()) {
    assert(seq.block_table.empty());
    const bool ok = pool.allocate(seq.n_swapped_blocks, seq.block_table);
    assert(ok);
    (void)ok;
    kv_.load_blocks(seq.block_table, seq.swapped_kv);
    drop_swapped(seq);
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
}

void BlockManager::free(Sequence& seq) {
  kv_.pool().release(seq.block_table);
  seq.block_table.clear();
  drop_swapped(seq);
}

void BlockManager::share(const Sequence& parent, Sequence& child) {
  assert(child.block_table.empty());
  for (int32_t b : parent.block_table) kv_.pool().retain(b);
  child.block_table = parent.block_table;
}

bool BlockManager::swap_out(Sequence& seq, size_t host_limit) {
  assert(!seq.swapped());
  // Only the blocks that hold computed tokens: any allocated for this step are just freed.
  const int32_t keep = blocks_for(seq.n_computed, block_size());
  const size_t bytes = static_cast<size_t>(keep) * kv_.shape().bytes_per_block();
  if (swapped_bytes_ + bytes > host_limit) return false;
  seq.swapped_kv.clear();
  kv_.save_blocks(std::span(seq.block_table).first(static_cast<size_t>(keep)), seq.swapped_kv);
  kv_.pool().release(seq.block_table);
  seq.block_table.clear();
  seq.n_swapped_blocks = keep;
  swapped_bytes_ += bytes;
  return true;
}

void BlockManager::drop_swapped(Sequence& seq) {
  if (seq.n_swapped_blocks == 0) return;
  swapped_bytes_ -= static_cast<size_t>(seq.n_swapped_blocks) * kv_.shape().bytes_per_block();
  seq.n_swapped_blocks = 0;
  seq.swapped_kv.clear();
  seq.swapped_kv.shrink_to_fit();
}

}  // namespace tokamak
