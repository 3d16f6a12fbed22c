// How the engine lays out its KV cache (engine/kv_layout.h): what each requested dtype is
// stored as, the hot window in blocks, the options a hot window rules out, and the hot
// copies charged to a memory budget.

#include "engine/kv_layout.h"

#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/engine_options.h"
#include "engine_test_util.h"

namespace tokamak {
namespace {

TEST(KVLayoutTest, Q4KeysAreStoredPerChannel) {
  EXPECT_EQ(stored_kv_dtypes(KVDType::Q4), KVDTypes(KVDType::Q4C, KVDType::Q4));
  EXPECT_EQ(stored_kv_dtypes(KVDTypes(KVDType::Int8, KVDType::Q4)),
            KVDTypes(KVDType::Int8, KVDType::Q4));
  EXPECT_EQ(stored_kv_dtypes(KVDType::F16), KVDTypes(KVDType::F16));
}

TEST(KVLayoutTest, HotWindowInWholeBlocks) {
  EXPECT_EQ(hot_window_blocks(16, KVDType::Int8, 0), 0);
  EXPECT_EQ(hot_window_blocks(16, KVDType::Int8, 1), 1);
  EXPECT_EQ(hot_window_blocks(16, KVDType::Int8, 256), 16);
  EXPECT_EQ(hot_window_blocks(16, KVDType::Int8, 257), 17);
  // q4 keys are encoded per block: the block being filled is always hot.
  EXPECT_EQ(hot_window_blocks(16, KVDType::Q4, 0), 1);
  EXPECT_EQ(hot_window_blocks(4, KVDType::Q4, 64), 16);
}

TEST(KVLayoutTest, OptionsAHotWindowRulesOut) {
  EngineOptions o;
  o.kv_dtype = KVDType::F16;
  o.kv_hot_window = 64;
  EXPECT_TRUE(validate(o).has_value()) << "f16 has nothing to keep exact";
  o.kv_dtype = KVDType::Int8;
  EXPECT_TRUE(validate(o).has_value()) << "wider than a block needs the prefix cache off";
  o.prefix_caching = false;
  EXPECT_FALSE(validate(o).has_value());
  o.kv_window = 48;
  EXPECT_TRUE(validate(o).has_value()) << "the hot window must fit in the sliding window";
  o.kv_window = 128;
  EXPECT_FALSE(validate(o).has_value());
  o.kv_heavy = 96;
  EXPECT_TRUE(validate(o).has_value()) << "nor in its heavy hitters";
  // q4 with the prefix cache: its one-block window is fine.
  EngineOptions q4;
  q4.kv_dtype = KVDType::Q4;
  EXPECT_FALSE(validate(q4).has_value());
}

// A memory budget pays for the hot copies out of the main pool; a token budget is the main
// pool's alone.
TEST(KVLayoutTest, MemoryBudgetPaysForTheHotCopies) {
  auto m = test::load_synthetic(test::small_spec());
  EngineOptions o = test::no_cache_options();
  o.kv_dtype = KVDType::Int8;
  o.kv_hot_window = 64;
  o.max_seqs = 4;
  o.kv_budget = KVBudget::tokens(1024);
  const EngineCore by_tokens(*m->model, *m->tok, o);
  ASSERT_NE(by_tokens.kv_cache().hot(), nullptr);
  EXPECT_EQ(by_tokens.kv_cache().n_blocks(), 1024 / o.block_size);
  EXPECT_EQ(by_tokens.kv_cache().hot_window_blocks(), 4);

  const KVLayout layout = kv_layout(*m->model, o.block_size, o.kv_dtype, o.kv_hot_window,
                                    o.max_seqs, o.max_batched_tokens);
  const size_t block = layout.shape.bytes_per_block();
  o.kv_budget = KVBudget::parse_memory(std::to_string(100 * block + layout.hot_bytes()));
  const EngineCore by_bytes(*m->model, *m->tok, o);
  // The hot copies are charged in whole main blocks, rounded up.
  const size_t charged = (layout.hot_bytes() + block - 1) / block;
  EXPECT_EQ(size_t(by_bytes.kv_cache().n_blocks()),
            (100 * block + layout.hot_bytes()) / block - charged);
  EXPECT_LE(by_bytes.kv_cache().total_bytes(), 100 * block + layout.hot_bytes() + block);

  o.kv_budget = KVBudget::parse_memory(std::to_string(layout.hot_bytes()));
  EXPECT_THROW(EngineCore(*m->model, *m->tok, o), Error) << "nothing left for the main pool";
}

}  // namespace
}  // namespace tokamak
