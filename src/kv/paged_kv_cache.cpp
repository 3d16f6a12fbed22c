#include "kv/paged_kv_cache.h"

#include <fmt/format.h>

#include <cassert>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace tokamak {
namespace {

// Largest byte count the cache may span: offsets within it must fit ptrdiff_t (int64).
constexpr size_t kMaxBytes = static_cast<size_t>(std::numeric_limits<int64_t>::max());

// a * b, or Error naming `what` when the product exceeds kMaxBytes.
size_t checked_mul(size_t a, size_t b, const char* what) {
  size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product) || product > kMaxBytes) {
    throw Error(fmt::format("KV cache {} overflows: {} x {} is too large to address", what, a, b));
  }
  return product;
}

void check_positive(int32_t value, const char* field) {
  if (value <= 0)
    throw Error(fmt::format("KV cache shape: {} must be positive, got {}", field, value));
}

void check_shape(const KVCacheShape& s) {
  check_positive(s.n_layer, "n_layer");
  check_positive(s.n_head_kv, "n_head_kv");
  check_positive(s.head_dim_k, "head_dim_k");
  check_positive(s.head_dim_v, "head_dim_v");
  check_positive(s.block_size, "block_size");
  if (!kv_dtype_supports(s.dtype.k, s.head_dim_k) || !kv_dtype_supports(s.dtype.v, s.head_dim_v)) {
    // q4 needs whole groups of 32 elements, q4c (per-channel keys) multiples of 8.
    throw Error(fmt::format(
        "KV dtype {} cannot store head dims {} and {} (q4 needs multiples of {}, q4c of 8)",
        kv_dtypes_name(s.dtype), s.head_dim_k, s.head_dim_v, kKVQ4Group));
  }
}

// Bytes of one layer's block in the element pool of keys or values (dtype, head dim):
// n_head_kv x block_size rows.
size_t block_row_bytes(const KVCacheShape& s, KVDType dtype, int32_t head_dim) {
  return checked_mul(checked_mul(size_t(s.n_head_kv), size_t(s.block_size), "block"),
                     kv_row_bytes(dtype, head_dim), "block");
}

// Bytes of one layer's block in the scale pool of keys or values: n_head_kv tiles' scales.
size_t block_scale_bytes(const KVCacheShape& s, KVDType dtype, int32_t head_dim) {
  return checked_mul(size_t(s.n_head_kv), kv_tile_scale_bytes(dtype, s.block_size, head_dim),
                     "block");
}

// Checks the shape and that the pools and their sum stay addressable; returns the shape.
const KVCacheShape& checked(const KVCacheShape& s, int32_t n_blocks) {
  check_shape(s);
  if (n_blocks <= 0)
    throw Error(fmt::format("KV cache: n_blocks must be positive, got {}", n_blocks));
  checked_mul(s.bytes_per_block(), size_t(n_blocks), "pool");
  return s;
}

// Bytes of one pool over all layers, given its bytes per layer and block; checked() passed.
size_t pool_bytes(const KVCacheShape& s, int32_t n_blocks, size_t per_layer_block) {
  return size_t(s.n_layer) * size_t(n_blocks) * per_layer_block;
}

}  // namespace

size_t KVCacheShape::element_bytes_per_token() const {
  check_shape(*this);
  const size_t heads = checked_mul(size_t(n_layer), size_t(n_head_kv), "bytes per token");
  // Each row is at most 4 * INT32_MAX bytes: the sum fits size_t.
  return checked_mul(heads, kv_row_bytes(dtype.k, head_dim_k) + kv_row_bytes(dtype.v, head_dim_v),
                     "bytes per token");
}

size_t KVCacheShape::scale_bytes_per_block() const {
  check_shape(*this);
  const size_t heads = checked_mul(size_t(n_layer), size_t(n_head_kv), "bytes per block");
  return checked_mul(heads,
                     kv_tile_scale_bytes(dtype.k, block_size, head_dim_k) +
                         kv_tile_scale_bytes(dtype.v, block_size, head_dim_v),
                     "bytes per block");
}

size_t KVCacheShape::bytes_per_block() const {
  const size_t elements =
      checked_mul(element_bytes_per_token(), size_t(block_size), "bytes per block");
  const size_t scales = scale_bytes_per_block();
  if (elements > kMaxBytes - scales) {
    throw Error(fmt::format("KV cache bytes per block overflows: {} + {}", elements, scales));
  }
  return elements + scales;
}

double KVCacheShape::bytes_per_token() const {
  return static_cast<double>(bytes_per_block()) / block_size;
}

PagedKVCache::PagedKVCache(const KVCacheShape& shape, int32_t n_blocks)
    : PagedKVCache(shape, n_blocks, 0, 0) {}

PagedKVCache::PagedKVCache(const KVCacheShape& shape, int32_t n_blocks, int32_t hot_window_blocks,
                           int32_t n_hot_blocks)
    : shape_(checked(shape, n_blocks)),
      pool_(n_blocks),
      k_(pool_bytes(shape, n_blocks, block_row_bytes(shape, shape.dtype.k, shape.head_dim_k))),
      v_(pool_bytes(shape, n_blocks, block_row_bytes(shape, shape.dtype.v, shape.head_dim_v))),
      k_scales_(
          pool_bytes(shape, n_blocks, block_scale_bytes(shape, shape.dtype.k, shape.head_dim_k))),
      v_scales_(
          pool_bytes(shape, n_blocks, block_scale_bytes(shape, shape.dtype.v, shape.head_dim_v))),
      hot_window_blocks_(hot_window_blocks) {
  if (hot_window_blocks < 0) throw Error("a hot window cannot hold a negative number of blocks");
  if (hot_window_blocks == 0) {
    if (!kv_dtype_writes_rows(shape.dtype.k) || !kv_dtype_writes_rows(shape.dtype.v)) {
      throw Error("KV dtype q4c encodes whole blocks: it needs a hot window");
    }
    return;
  }
  KVCacheShape hot_shape = shape;
  hot_shape.dtype = KVDType::F16;
  hot_ = std::make_unique<PagedKVCache>(hot_shape, n_hot_blocks);
}

PagedKVCache::~PagedKVCache() = default;
PagedKVCache::PagedKVCache(PagedKVCache&&) noexcept = default;

PagedKVCache::BlockBytes PagedKVCache::block_bytes(int32_t layer, int32_t block) const {
  assert(layer >= 0 && layer < shape_.n_layer);
  assert(block >= 0 && block < n_blocks());
  const size_t index = size_t(layer) * size_t(n_blocks()) + size_t(block);
  BlockBytes b;
  b.size[0] = block_row_bytes(shape_, shape_.dtype.k, shape_.head_dim_k);
  b.size[1] = block_row_bytes(shape_, shape_.dtype.v, shape_.head_dim_v);
  b.size[2] = block_scale_bytes(shape_, shape_.dtype.k, shape_.head_dim_k);
  b.size[3] = block_scale_bytes(shape_, shape_.dtype.v, shape_.head_dim_v);
  const AlignedBuffer<uint8_t>* pools[4] = {&k_, &v_, &k_scales_, &v_scales_};
  for (int i = 0; i < 4; ++i) {
    b.data[i] =
        b.size[i] == 0 ? nullptr : const_cast<uint8_t*>(pools[i]->data()) + index * b.size[i];
  }
  return b;
}

PagedKVView PagedKVCache::layer(int32_t layer) const {
  const BlockBytes b = block_bytes(layer, 0);
  PagedKVView view;
  view.k = b.data[0];
  view.v = b.data[1];
  view.k_scales = b.data[2];
  view.v_scales = b.data[3];
  view.dtypes = shape_.dtype;
  view.n_blocks = n_blocks();
  view.block_size = shape_.block_size;
  view.n_head_kv = shape_.n_head_kv;
  view.head_dim_k = shape_.head_dim_k;
  view.head_dim_v = shape_.head_dim_v;
  if (hot_) {
    const PagedKVView h = hot_->layer(layer);
    view.hot_k = h.k;
    view.hot_v = h.v;
    view.hot_n_blocks = h.n_blocks;
    view.hot_window_blocks = hot_window_blocks_;
  }
  return view;
}

void PagedKVCache::copy_block(int32_t src, int32_t dst) {
  assert(src >= 0 && src < n_blocks() && dst >= 0 && dst < n_blocks());
  if (src == dst) return;
  for (int32_t l = 0; l < shape_.n_layer; ++l) {
    const BlockBytes from = block_bytes(l, src);
    const BlockBytes to = block_bytes(l, dst);
    for (int i = 0; i < 4; ++i) {
      if (from.size[i] != 0) std::memcpy(to.data[i], from.data[i], from.size[i]);
    }
  }
}

// Host layout of one saved block: for each layer, its K rows, V rows, K scales, V scales.
void PagedKVCache::save_blocks(std::span<const int32_t> blocks, std::vector<uint8_t>& host) const {
  size_t offset = host.size();
  host.resize(offset + blocks.size() * shape_.bytes_per_block());
  for (int32_t block : blocks) {
    for (int32_t l = 0; l < shape_.n_layer; ++l) {
      const BlockBytes b = block_bytes(l, block);
      for (int i = 0; i < 4; ++i) {
        if (b.size[i] == 0) continue;
        std::memcpy(host.data() + offset, b.data[i], b.size[i]);
        offset += b.size[i];
      }
    }
  }
  assert(offset == host.size());
}

void PagedKVCache::load_blocks(std::span<const int32_t> blocks, std::span<const uint8_t> host) {
  assert(host.size() == blocks.size() * shape_.bytes_per_block());
  size_t offset = 0;
  for (int32_t block : blocks) {
    for (int32_t l = 0; l < shape_.n_layer; ++l) {
      const BlockBytes b = block_bytes(l, block);
      for (int i = 0; i < 4; ++i) {
        if (b.size[i] == 0) continue;
        std::memcpy(b.data[i], host.data() + offset, b.size[i]);
        offset += b.size[i];
      }
    }
  }
}

}  // namespace tokamak
