#include "kv/kv_cache.h"

#include <gtest/gtest.h>

namespace tokamak {
namespace {

TEST(KVCacheTest, ShapesAndViews) {
  KVCache kv(3, 16, 24, 8);
  EXPECT_EQ(kv.n_layer(), 3);
  EXPECT_EQ(kv.n_ctx(), 16);
  EXPECT_EQ(kv.size(), 0);
  const Tensor k1 = kv.keys(1);
  EXPECT_EQ(k1.dtype, DType::F16);
  EXPECT_EQ(k1.rank, 2);
  EXPECT_EQ(k1.shape[0], 16);
  EXPECT_EQ(k1.shape[1], 24);
  EXPECT_EQ(k1.stride[0], 48);
  const Tensor v2 = kv.values(2);
  EXPECT_EQ(v2.shape[1], 8);
  // Layers do not overlap; rows [pos, pos + n) are views into the layer.
  const Tensor k0 = kv.keys(0);
  EXPECT_EQ(static_cast<uint8_t*>(k1.data) - static_cast<uint8_t*>(k0.data), 16 * 24 * 2);
  const Tensor rows = kv.key_rows(1, 5, 3);
  EXPECT_EQ(rows.shape[0], 3);
  EXPECT_EQ(static_cast<uint8_t*>(rows.data) - static_cast<uint8_t*>(k1.data), 5 * 24 * 2);
  const Tensor vrows = kv.value_rows(2, 15, 1);
  EXPECT_EQ(static_cast<uint8_t*>(vrows.data) - static_cast<uint8_t*>(v2.data), 15 * 8 * 2);
  // Storage is 64-byte aligned and zeroed.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(k0.data) % 64, 0u);
  EXPECT_EQ(static_cast<uint16_t*>(v2.data)[7], 0);
}

TEST(KVCacheTest, AdvanceTruncateClear) {
  KVCache kv(1, 8, 4, 4);
  kv.advance(3);
  kv.advance(5);
  EXPECT_EQ(kv.size(), 8);
  kv.truncate(2);
  EXPECT_EQ(kv.size(), 2);
  kv.clear();
  EXPECT_EQ(kv.size(), 0);
}

}  // namespace
}  // namespace tokamak
