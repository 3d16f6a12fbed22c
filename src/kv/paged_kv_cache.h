#pragma once
// PagedKVCache: the KV storage of the serving engine, allocated once at start.
//
// One pool of n_blocks fixed-size blocks (block_size tokens each) per layer, for K and for
// V, in the KV dtype (core/kv_dtype.h, default F16), laid out for the attention kernel as
// core/paged_kv_view.h draws it:
//
//   keys of layer l:   (n_blocks, n_head_kv, block_size, row bytes of head_dim_k)
//   values of layer l: (n_blocks, n_head_kv, block_size, row bytes of head_dim_v)
//   their scales:      (n_blocks, n_head_kv, tile scale bytes)   int8, fp8, q4 only
//
// A block id means the same token range in every layer, so one block table per sequence
// serves all layers; token t of a sequence lives in slot block_table[t / block_size] *
// block_size + t % block_size. Which blocks are free and who owns them is the BlockPool's
// business (pool()); this class only stores, copies (copy-on-write of a shared block) and
// moves blocks to host memory and back (swap preemption).
//
// Memory per token = 2 (K and V) x n_layer x n_head_kv x head_dim x bytes per element (2
// for F16), plus the scales of quantized dtypes spread over the block's tokens: the figure
// bytes_per_token() gives and `tokamak serve` prints at start-up.
//
// The hot window (optional; engine/hot_window.h): a second, F16 cache (hot()) of its own
// blocks keeps each running sequence's newest hot_window_blocks() blocks, and the block
// being filled, at full precision, and attention reads them from there; the main pool then
// holds only whole blocks, each encoded once, when it fills, from its hot copy. That is
// what lets keys be quantized per channel across a block's tokens (KVDType::Q4C), and what
// keeps the most recent tokens exact under any quantized dtype (hot/cold).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/kv_dtype.h"
#include "core/paged_kv_view.h"
#include "kv/block_pool.h"

namespace tokamak {

struct KVCacheShape {
  int32_t n_layer = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  int32_t block_size = 16;
  KVDTypes dtype = KVDType::F16;  // of keys and of values (one KVDType sets both)

  // Bytes of K and V elements for one token over all layers; bytes of K and V scales for one
  // block over all layers (0 for f16, bf16, f32); all bytes of one block of block_size tokens
  // (block_size x element bytes + scale bytes); that over block_size. Throw Error for a
  // non-positive field, a head dim the dtype cannot store, or a figure too large to address.
  size_t element_bytes_per_token() const;
  size_t scale_bytes_per_block() const;
  size_t bytes_per_block() const;
  double bytes_per_token() const;
};

class PagedKVCache {
 public:
  // Throws Error for a shape with a non-positive field or a pool too large to address, or
  // for keys in Q4C (whole blocks only: they need a hot window).
  PagedKVCache(const KVCacheShape& shape, int32_t n_blocks);
  // With a hot window of hot_window_blocks blocks per sequence (0: none, as above) and an
  // F16 cache of n_hot_blocks blocks for the hot copies.
  PagedKVCache(const KVCacheShape& shape, int32_t n_blocks, int32_t hot_window_blocks,
               int32_t n_hot_blocks);
  ~PagedKVCache();
  PagedKVCache(PagedKVCache&&) noexcept;

  // The F16 cache of hot copies, or null without a hot window.
  PagedKVCache* hot() { return hot_.get(); }
  const PagedKVCache* hot() const { return hot_.get(); }
  // Blocks of each sequence, besides the one being filled, that attention reads from hot()
  // (0: no hot window). A query at position p reads blocks [0, c) from this cache and the
  // rest from hot(), c = max(0, p / block_size - hot_window_blocks + 1).
  int32_t hot_window_blocks() const { return hot_window_blocks_; }

  const KVCacheShape& shape() const { return shape_; }
  int32_t block_size() const { return shape_.block_size; }
  int32_t n_blocks() const { return pool_.n_blocks(); }
  KVDTypes dtype() const { return shape_.dtype; }
  double bytes_per_token() const { return shape_.bytes_per_token(); }
  // Bytes of every pool, the hot copies' included.
  size_t total_bytes() const {
    return k_.size() + v_.size() + k_scales_.size() + v_scales_.size() +
           (hot_ ? hot_->total_bytes() : 0);
  }

  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // The kernels' view of one layer.
  PagedKVView layer(int32_t layer) const;

  // Copies every layer's K and V of block src into block dst (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

  // Swap preemption: the blocks' K and V of every layer, in order, appended to / read from
  // host memory (bytes_per_block() each).
  void save_blocks(std::span<const int32_t> blocks, std::vector<uint8_t>& host) const;
  void load_blocks(std::span<const int32_t> blocks, std::span<const uint8_t> host);

 private:
  // The byte ranges of one layer's block in each of the four pools, in the order they are
  // saved to host memory.
  struct BlockBytes {
    uint8_t* data[4];
    size_t size[4];
  };
  BlockBytes block_bytes(int32_t layer, int32_t block) const;

  KVCacheShape shape_;
  BlockPool pool_;
  AlignedBuffer<uint8_t> k_;         // (n_layer, n_blocks, n_head_kv, block_size, k row bytes)
  AlignedBuffer<uint8_t> v_;         // (n_layer, n_blocks, n_head_kv, block_size, v row bytes)
  AlignedBuffer<uint8_t> k_scales_;  // (n_layer, n_blocks, n_head_kv, k tile scale bytes)
  AlignedBuffer<uint8_t> v_scales_;  // (n_layer, n_blocks, n_head_kv, v tile scale bytes)
  int32_t hot_window_blocks_ = 0;
  std::unique_ptr<PagedKVCache> hot_;  // F16, same layers and heads; null: no hot window
};

}  // namespace tokamak
