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
  if (s.dtype != KVDType::F16) {
    throw Error(fmt::format("KV dtype {} is not implemented yet", kv_dtype_name(s.dtype)));
  }
}

// Elements of one layer's block: n_head_kv x block_size x head_dim, checked.
size_t checked_block_elements(const KVCacheShape& s, int32_t head_dim) {
  return checked_mul(checked_mul(size_t(s.n_head_kv), size_t(s.block_size), "block"),
                     size_t(head_dim), "block");
}

// The same for a shape that has passed checked().
size_t block_elements(const KVCacheShape& s, int32_t head_dim) {
  return size_t(s.n_head_kv) * size_t(s.block_size) * size_t(head_dim);
}

// Checks the shape and that both pools and their sum stay addressable; returns the shape.
const KVCacheShape& checked(const KVCacheShape& s, int32_t n_blocks) {
  check_shape(s);
  if (n_blocks <= 0)
    throw Error(fmt::format("KV cache: n_blocks must be positive, got {}", n_blocks));
  size_t layers_blocks = checked_mul(size_t(s.n_layer), size_t(n_blocks), "pool");
  size_t k_bytes =
      checked_mul(checked_mul(layers_blocks, checked_block_elements(s, s.head_dim_k), "pool"),
                  sizeof(uint16_t), "pool");
  size_t v_bytes =
      checked_mul(checked_mul(layers_blocks, checked_block_elements(s, s.head_dim_v), "pool"),
                  sizeof(uint16_t), "pool");
  if (k_bytes > kMaxBytes - v_bytes) {
    throw Error(fmt::format("KV cache pool overflows: {} + {} bytes is too large to address",
                            k_bytes, v_bytes));
  }
  return s;
}

// Elements of one pool (K or V) over all layers; the shape has passed checked().
size_t pool_elements(const KVCacheShape& s, int32_t n_blocks, int32_t head_dim) {
  return size_t(s.n_layer) * size_t(n_blocks) * size_t(s.n_head_kv) * size_t(s.block_size) *
         size_t(head_dim);
}

}  // namespace

size_t KVCacheShape::bytes_per_token() const {
  check_shape(*this);
  size_t heads = checked_mul(size_t(n_layer), size_t(n_head_kv), "bytes per token");
  // head_dim_k + head_dim_v fits size_t: both are int32.
  size_t elements = checked_mul(heads, size_t(head_dim_k) + size_t(head_dim_v), "bytes per token");
  return checked_mul(elements, sizeof(uint16_t), "bytes per token");
}

size_t KVCacheShape::bytes_per_block() const {
  return checked_mul(bytes_per_token(), size_t(block_size), "bytes per block");
}

PagedKVCache::PagedKVCache(const KVCacheShape& shape, int32_t n_blocks)
    : shape_(checked(shape, n_blocks)),
      pool_(n_blocks),
      k_(pool_elements(shape, n_blocks, shape.head_dim_k)),
      v_(pool_elements(shape, n_blocks, shape.head_dim_v)) {}

uint16_t* PagedKVCache::k_block(int32_t layer, int32_t block) const {
  assert(layer >= 0 && layer < shape_.n_layer);
  assert(block >= 0 && block < n_blocks());
  size_t index = size_t(layer) * size_t(n_blocks()) + size_t(block);
  return const_cast<uint16_t*>(k_.data()) + index * block_elements(shape_, shape_.head_dim_k);
}

uint16_t* PagedKVCache::v_block(int32_t layer, int32_t block) const {
  assert(layer >= 0 && layer < shape_.n_layer);
  assert(block >= 0 && block < n_blocks());
  size_t index = size_t(layer) * size_t(n_blocks()) + size_t(block);
  return const_cast<uint16_t*>(v_.data()) + index * block_elements(shape_, shape_.head_dim_v);
}

PagedKVView PagedKVCache::layer(int32_t layer) const {
  PagedKVView view;
  view.k = k_block(layer, 0);
  view.v = v_block(layer, 0);
  view.n_blocks = n_blocks();
  view.block_size = shape_.block_size;
  view.n_head_kv = shape_.n_head_kv;
  view.head_dim_k = shape_.head_dim_k;
  view.head_dim_v = shape_.head_dim_v;
  return view;
}

void PagedKVCache::copy_block(int32_t src, int32_t dst) {
  assert(src >= 0 && src < n_blocks() && dst >= 0 && dst < n_blocks());
  if (src == dst) return;
  size_t k_bytes = block_elements(shape_, shape_.head_dim_k) * sizeof(uint16_t);
  size_t v_bytes = block_elements(shape_, shape_.head_dim_v) * sizeof(uint16_t);
  for (int32_t l = 0; l < shape_.n_layer; ++l) {
    std::memcpy(k_block(l, dst), k_block(l, src), k_bytes);
    std::memcpy(v_block(l, dst), v_block(l, src), v_bytes);
  }
}

// Host layout of one saved block: for each layer, its K block then its V block.
void PagedKVCache::save_blocks(std::span<const int32_t> blocks, std::vector<uint8_t>& host) const {
  size_t k_bytes = block_elements(shape_, shape_.head_dim_k) * sizeof(uint16_t);
  size_t v_bytes = block_elements(shape_, shape_.head_dim_v) * sizeof(uint16_t);
  size_t offset = host.size();
  host.resize(offset + blocks.size() * shape_.bytes_per_block());
  for (int32_t block : blocks) {
    for (int32_t l = 0; l < shape_.n_layer; ++l) {
      std::memcpy(host.data() + offset, k_block(l, block), k_bytes);
      offset += k_bytes;
      std::memcpy(host.data() + offset, v_block(l, block), v_bytes);
      offset += v_bytes;
    }
  }
  assert(offset == host.size());
}

void PagedKVCache::load_blocks(std::span<const int32_t> blocks, std::span<const uint8_t> host) {
  assert(host.size() == blocks.size() * shape_.bytes_per_block());
  size_t k_bytes = block_elements(shape_, shape_.head_dim_k) * sizeof(uint16_t);
  size_t v_bytes = block_elements(shape_, shape_.head_dim_v) * sizeof(uint16_t);
  size_t offset = 0;
  for (int32_t block : blocks) {
    for (int32_t l = 0; l < shape_.n_layer; ++l) {
      std::memcpy(k_block(l, block), host.data() + offset, k_bytes);
      offset += k_bytes;
      std::memcpy(v_block(l, block), host.data() + offset, v_bytes);
      offset += v_bytes;
    }
  }
}

}  // namespace tokamak
