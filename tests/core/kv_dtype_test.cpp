// KV dtype names and storage sizes (core/kv_dtype.h), q4c's above all: a dtype with a name
// and a layout, but not one a user can give the main cache (--kv-dtype).

#include "core/kv_dtype.h"

#include <gtest/gtest.h>

namespace tokamak {
namespace {

TEST(KVDTypeTest, NamesRoundTripForTheUserDtypes) {
  for (KVDType d :
       {KVDType::F16, KVDType::BF16, KVDType::F32, KVDType::Int8, KVDType::Fp8, KVDType::Q4}) {
    EXPECT_EQ(kv_dtype_from_name(kv_dtype_name(d)), d) << kv_dtype_name(d);
    EXPECT_TRUE(kv_dtype_writes_rows(d));
  }
  EXPECT_EQ(kv_dtypes_from_name("INT8,q4"), KVDTypes(KVDType::Int8, KVDType::Q4));
  EXPECT_EQ(kv_dtype_choices(), "f16|bf16|f32|int8|fp8|q4");
}

// q4c is named (logs, benchmarks) but refused as a --kv-dtype: every token of the main cache
// is written row by row, which a q4c tile cannot take.
TEST(KVDTypeTest, Q4cIsNamedButNotAUserDtype) {
  EXPECT_EQ(kv_dtype_name(KVDType::Q4C), "q4c");
  EXPECT_EQ(kv_dtypes_name(KVDTypes(KVDType::Q4C, KVDType::Q4)), "q4c,q4");
  EXPECT_FALSE(kv_dtype_writes_rows(KVDType::Q4C));
  EXPECT_EQ(kv_dtype_from_name("q4c"), std::nullopt);
  EXPECT_EQ(kv_dtype_from_name("Q4C"), std::nullopt);
  EXPECT_EQ(kv_dtypes_from_name("q4c"), std::nullopt);
  EXPECT_EQ(kv_dtypes_from_name("q4c,q4"), std::nullopt);
  EXPECT_EQ(kv_dtypes_from_name("f16,q4c"), std::nullopt);
}

// q4c: codes as q4 (head_dim / 2 bytes a row), and per tile head_dim f16 scales and head_dim
// f16 minimums, whatever the block size; head dims in multiples of 8.
TEST(KVDTypeTest, Q4cSizes) {
  EXPECT_EQ(kv_row_bytes(KVDType::Q4C, 64), 32u);
  EXPECT_EQ(kv_row_bytes(KVDType::Q4C, 40), 20u);
  EXPECT_EQ(kv_tile_scale_bytes(KVDType::Q4C, 16, 64), 256u);
  EXPECT_EQ(kv_tile_scale_bytes(KVDType::Q4C, 1, 64), 256u);
  EXPECT_EQ(kv_tile_scale_bytes(KVDType::Q4C, 32, 128), 512u);
  EXPECT_TRUE(kv_dtype_supports(KVDType::Q4C, 8));
  EXPECT_TRUE(kv_dtype_supports(KVDType::Q4C, 40));
  EXPECT_FALSE(kv_dtype_supports(KVDType::Q4C, 12));
  EXPECT_FALSE(kv_dtype_supports(KVDType::Q4C, 0));
  EXPECT_FALSE(kv_dtype_supports(KVDType::Q4, 40));  // q4 still needs whole groups of 32
  EXPECT_EQ(kv_tile_scale_bytes(KVDType::Q4, 16, 64), 64u);
}

}  // namespace
}  // namespace tokamak
