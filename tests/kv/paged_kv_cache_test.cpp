#include "kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"

namespace tokamak {
namespace {

// Small, with K and V of different widths so a mix-up of the two shows.
KVCacheShape small_shape() {
  KVCacheShape s;
  s.n_layer = 3;
  s.n_head_kv = 2;
  s.head_dim_k = 4;
  s.head_dim_v = 6;
  s.block_size = 5;
  return s;
}

// A value that names its place: which pool, layer, block, head, token and dimension.
uint16_t tag(int kv, int l, int b, int h, int t, int d) {
  return static_cast<uint16_t>(kv * 32768 + l * 4096 + b * 512 + h * 64 + t * 8 + d);
}

// Writes tag() into every element of the given blocks through the layer views.
void fill(PagedKVCache& cache, const std::vector<int32_t>& blocks) {
  const KVCacheShape& s = cache.shape();
  for (int32_t l = 0; l < s.n_layer; ++l) {
    PagedKVView view = cache.layer(l);
    for (int32_t b : blocks) {
      for (int32_t h = 0; h < s.n_head_kv; ++h) {
        auto* k = reinterpret_cast<uint16_t*>(view.k_tile(b, h));
        auto* v = reinterpret_cast<uint16_t*>(view.v_tile(b, h));
        for (int32_t t = 0; t < s.block_size; ++t) {
          for (int32_t d = 0; d < s.head_dim_k; ++d)
            k[t * s.head_dim_k + d] = tag(0, l, b, h, t, d);
          for (int32_t d = 0; d < s.head_dim_v; ++d)
            v[t * s.head_dim_v + d] = tag(1, l, b, h, t, d);
        }
      }
    }
  }
}

// Element (b, h, t, d) of a layer pool, by the layout's offsets alone.
uint16_t at(const uint8_t* base, const KVCacheShape& s, int32_t head_dim, int32_t b, int32_t h,
            int32_t t, int32_t d) {
  size_t offset = ((size_t(b) * s.n_head_kv + h) * s.block_size + t) * head_dim + d;
  return reinterpret_cast<const uint16_t*>(base)[offset];
}

// Checks every element of one block: tag() of block `as` (0 when `as` is -1: never written).
void expect_block(const PagedKVCache& cache, int32_t block, int32_t as) {
  const KVCacheShape& s = cache.shape();
  for (int32_t l = 0; l < s.n_layer; ++l) {
    PagedKVView view = cache.layer(l);
    for (int32_t h = 0; h < s.n_head_kv; ++h) {
      for (int32_t t = 0; t < s.block_size; ++t) {
        for (int32_t d = 0; d < s.head_dim_k; ++d) {
          uint16_t want = as < 0 ? 0 : tag(0, l, as, h, t, d);
          ASSERT_EQ(at(view.k, s, s.head_dim_k, block, h, t, d), want)
              << "K layer " << l << " block " << block << " head " << h << " token " << t;
        }
        for (int32_t d = 0; d < s.head_dim_v; ++d) {
          uint16_t want = as < 0 ? 0 : tag(1, l, as, h, t, d);
          ASSERT_EQ(at(view.v, s, s.head_dim_v, block, h, t, d), want)
              << "V layer " << l << " block " << block << " head " << h << " token " << t;
        }
      }
    }
  }
}

TEST(KVCacheShape, BytesPerToken) {
  KVCacheShape s;
  s.n_layer = 22;
  s.n_head_kv = 4;
  s.head_dim_k = 64;
  s.head_dim_v = 64;
  s.block_size = 16;
  EXPECT_EQ(s.bytes_per_token(), 2u * 22 * 4 * 64 * 2);
  EXPECT_EQ(s.bytes_per_block(), 2u * 22 * 4 * 64 * 2 * 16);
  s.head_dim_k = 192;  // K wider than V (as in MLA-style heads)
  s.head_dim_v = 128;
  EXPECT_EQ(s.bytes_per_token(), 22u * 4 * (192 + 128) * 2);
}

TEST(KVCacheShape, BytesOfEachDtype) {
  KVCacheShape s;
  s.n_layer = 30;
  s.n_head_kv = 3;
  s.head_dim_k = s.head_dim_v = 64;
  s.block_size = 16;
  const size_t heads = 2 * 30 * 3;  // K and V
  s.dtype = KVDType::BF16;
  EXPECT_EQ(s.bytes_per_block(), heads * 16 * 64 * 2);
  s.dtype = KVDType::F32;
  EXPECT_EQ(s.bytes_per_block(), heads * 16 * 64 * 4);
  for (KVDType d : {KVDType::Int8, KVDType::Fp8}) {
    s.dtype = d;  // one f16 scale per row
    EXPECT_EQ(s.element_bytes_per_token(), heads * 64);
    EXPECT_EQ(s.scale_bytes_per_block(), heads * 16 * 2);
    EXPECT_EQ(s.bytes_per_block(), heads * 16 * (64 + 2));
    EXPECT_DOUBLE_EQ(s.bytes_per_token(), heads * 66.0);
  }
  s.dtype = KVDType::Q4;  // 16 bytes and one f16 scale per 32 elements
  EXPECT_EQ(s.element_bytes_per_token(), heads * 32);
  EXPECT_EQ(s.scale_bytes_per_block(), heads * 16 * 2 * 2);
  EXPECT_DOUBLE_EQ(s.bytes_per_token(), heads * (32 + 4.0));
  s.head_dim_k = s.head_dim_v = 80;  // not whole q4 groups
  EXPECT_THROW(s.bytes_per_block(), Error);
  EXPECT_THROW(PagedKVCache(s, 4), Error);
}

// Every byte of the four pools (elements and scales) of a quantized cache travels with its
// block through copy_block and save/load.
TEST(PagedKVCache, QuantizedBlocksCarryTheirScales) {
  KVCacheShape s;
  s.n_layer = 2;
  s.n_head_kv = 2;
  s.head_dim_k = 32;
  s.head_dim_v = 64;
  s.block_size = 4;
  for (KVDType dtype : {KVDType::Int8, KVDType::Q4}) {
    s.dtype = dtype;
    PagedKVCache cache(s, 5);
    // Tags bytes of block b with (b + 1) * 7 + layer + pool; returns the block's bytes.
    const auto bytes_of = [&](int32_t b) {
      std::vector<uint8_t> out;
      for (int32_t l = 0; l < s.n_layer; ++l) {
        const PagedKVView v = cache.layer(l);
        out.insert(out.end(), v.k_tile(b, 0), v.k_tile(b, 0) + v.k_block_stride());
        out.insert(out.end(), v.v_tile(b, 0), v.v_tile(b, 0) + v.v_block_stride());
        out.insert(out.end(), v.k_tile_scales(b, 0),
                   v.k_tile_scales(b, 0) + v.k_scale_block_stride());
        out.insert(out.end(), v.v_tile_scales(b, 0),
                   v.v_tile_scales(b, 0) + v.v_scale_block_stride());
      }
      return out;
    };
    for (int32_t b = 0; b < 5; ++b) {
      for (int32_t l = 0; l < s.n_layer; ++l) {
        const PagedKVView v = cache.layer(l);
        const auto tag = [&](uint8_t* p, size_t n, int pool) {
          for (size_t i = 0; i < n; ++i)
            p[i] = static_cast<uint8_t>((b + 1) * 7 + l * 3 + pool + i);
        };
        tag(v.k_tile(b, 0), v.k_block_stride(), 0);
        tag(v.v_tile(b, 0), v.v_block_stride(), 1);
        tag(v.k_tile_scales(b, 0), v.k_scale_block_stride(), 2);
        tag(v.v_tile_scales(b, 0), v.v_scale_block_stride(), 3);
      }
    }
    const auto b1 = bytes_of(1);
    const auto b2 = bytes_of(2);
    ASSERT_EQ(b1.size(), s.bytes_per_block());
    cache.copy_block(1, 3);
    EXPECT_EQ(bytes_of(3), b1);
    std::vector<uint8_t> host;
    const std::vector<int32_t> saved = {2, 1};
    cache.save_blocks(saved, host);
    ASSERT_EQ(host.size(), 2 * s.bytes_per_block());
    const std::vector<int32_t> restored = {4, 0};
    cache.load_blocks(restored, host);
    EXPECT_EQ(bytes_of(4), b2) << kv_dtype_name(dtype);
    EXPECT_EQ(bytes_of(0), b1) << kv_dtype_name(dtype);
    EXPECT_EQ(cache.total_bytes(), 5 * s.bytes_per_block());
  }
}

TEST(KVCacheShape, BadShapesThrow) {
  EXPECT_THROW(KVCacheShape{}.bytes_per_token(), Error);
  KVCacheShape s = small_shape();
  s.head_dim_v = -1;
  EXPECT_THROW(s.bytes_per_token(), Error);
  s = small_shape();
  s.block_size = 0;
  EXPECT_THROW(s.bytes_per_block(), Error);
}

TEST(PagedKVCache, SizesAndViews) {
  KVCacheShape s = small_shape();
  PagedKVCache cache(s, 7);
  EXPECT_EQ(cache.n_blocks(), 7);
  EXPECT_EQ(cache.block_size(), 5);
  EXPECT_EQ(cache.pool().n_blocks(), 7);
  EXPECT_EQ(cache.pool().n_free(), 7);
  EXPECT_EQ(cache.bytes_per_token(), 3.0 * 2 * (4 + 6) * 2);
  EXPECT_EQ(cache.total_bytes(), cache.bytes_per_token() * 5 * 7);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.layer(0).k) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cache.layer(0).v) % 64, 0u);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    PagedKVView view = cache.layer(l);
    EXPECT_EQ(view.n_blocks, 7);
    EXPECT_EQ(view.block_size, 5);
    EXPECT_EQ(view.n_head_kv, 2);
    EXPECT_EQ(view.head_dim_k, 4);
    EXPECT_EQ(view.head_dim_v, 6);
    if (l > 0) {  // layers follow each other in one buffer per pool
      EXPECT_EQ(view.k, cache.layer(l - 1).k + 7 * view.k_block_stride());
      EXPECT_EQ(view.v, cache.layer(l - 1).v + 7 * view.v_block_stride());
    }
  }
}

TEST(PagedKVCache, LayoutIsBlockHeadTokenDim) {
  PagedKVCache cache(small_shape(), 4);
  expect_block(cache, 2, -1);  // zero-initialised
  fill(cache, {0, 1, 2, 3});
  for (int32_t b = 0; b < 4; ++b) expect_block(cache, b, b);
}

TEST(PagedKVCache, CopyBlockCopiesAllLayersAndOnlyThatBlock) {
  PagedKVCache cache(small_shape(), 4);
  fill(cache, {0, 1, 2});
  cache.copy_block(1, 3);
  expect_block(cache, 3, 1);
  expect_block(cache, 0, 0);
  expect_block(cache, 1, 1);
  expect_block(cache, 2, 2);
  cache.copy_block(2, 2);  // onto itself: no change
  expect_block(cache, 2, 2);
}

TEST(PagedKVCache, SaveLoadRoundTrip) {
  PagedKVCache cache(small_shape(), 6);
  fill(cache, {0, 1, 2, 3, 4, 5});
  std::vector<uint8_t> host = {7, 7, 7};  // appended to
  std::vector<int32_t> saved = {4, 1};
  cache.save_blocks(saved, host);
  ASSERT_EQ(host.size(), 3 + 2 * cache.shape().bytes_per_block());
  EXPECT_EQ(host[0], 7);

  // Swapped back in elsewhere: block 4's data lands in 0, block 1's in 5.
  std::vector<int32_t> restored = {0, 5};
  cache.load_blocks(restored, std::span<const uint8_t>(host).subspan(3));
  expect_block(cache, 0, 4);
  expect_block(cache, 5, 1);
  expect_block(cache, 1, 1);
  expect_block(cache, 2, 2);
  expect_block(cache, 3, 3);
  expect_block(cache, 4, 4);

  std::vector<uint8_t> empty;
  cache.save_blocks({}, empty);
  EXPECT_TRUE(empty.empty());
}

TEST(PagedKVCache, BadShapesThrow) {
  KVCacheShape s = small_shape();
  EXPECT_THROW(PagedKVCache(s, 0), Error);
  EXPECT_THROW(PagedKVCache(s, -3), Error);
  for (int32_t KVCacheShape::*field :
       {&KVCacheShape::n_layer, &KVCacheShape::n_head_kv, &KVCacheShape::head_dim_k,
        &KVCacheShape::head_dim_v, &KVCacheShape::block_size}) {
    KVCacheShape bad = small_shape();
    bad.*field = 0;
    EXPECT_THROW(PagedKVCache(bad, 4), Error);
    bad.*field = -1;
    EXPECT_THROW(PagedKVCache(bad, 4), Error);
  }
}

TEST(PagedKVCache, PoolTooLargeToAddressThrows) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  KVCacheShape s;
  s.n_layer = kMax;
  s.n_head_kv = kMax;
  s.head_dim_k = kMax;
  s.head_dim_v = kMax;
  s.block_size = kMax;
  EXPECT_THROW(s.bytes_per_token(), Error);  // overflows size_t
  EXPECT_THROW(PagedKVCache(s, kMax), Error);

  // 2^62 elements per pool fit size_t, but their 2^63 bytes do not fit int64.
  s.n_layer = 1 << 16;
  s.n_head_kv = 1 << 15;
  s.block_size = 1 << 16;
  s.head_dim_k = 1;
  s.head_dim_v = 1;
  EXPECT_THROW(PagedKVCache(s, 1 << 15), Error);
}

}  // namespace
}  // namespace tokamak
