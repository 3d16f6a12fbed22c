// Heavy-hitter eviction (engine/kv_heavy.h, engine/kv_window.h with heavy > 0): which blocks
// the choice drops, that a slide drops exactly those and moves each kept block down by the
// tokens dropped before it, and an engine that generates past the context with it.

#include "engine/kv_heavy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_core.h"
#include "engine/kv_window.h"
#include "engine/sequence.h"
#include "engine_test_util.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {
namespace {

using test::greedy;
using test::make_request;

TEST(HeavyHitterDropsTest, DropsTheLeastAttendedAscending) {
  const std::vector<float> mass = {9, 5, 1, 7, 0.5f, 3, 8};
  EXPECT_EQ(heavy_hitter_drops(mass, 1, 6, 2), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(heavy_hitter_drops(mass, 1, 6, 3), (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(heavy_hitter_drops(mass, 0, 7, 0), std::vector<int32_t>{});
  // Index 0 is outside [1, 6): never chosen, whatever its mass.
  EXPECT_EQ(heavy_hitter_drops(mass, 1, 6, 5), (std::vector<int32_t>{1, 2, 3, 4, 5}));
}

TEST(HeavyHitterDropsTest, TiesGoToTheOlderAndMissingEntriesCountAsZero) {
  const std::vector<float> mass = {2, 2, 2, 2};
  EXPECT_EQ(heavy_hitter_drops(mass, 0, 4, 2), (std::vector<int32_t>{0, 1}));
  const std::vector<float> short_mass = {0.5f, 0.1f};
  EXPECT_EQ(heavy_hitter_drops(short_mass, 0, 5, 2), (std::vector<int32_t>{2, 3}));
}

// small_spec(): n_ctx 256, block 16, F32 cache so that rotations round-trip closely.
class KVHeavyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()); }
  static void TearDownTestSuite() { model_.reset(); }
  Model& model() { return *model_->model; }
  const Tokenizer& tok() { return *model_->tok; }
  static std::unique_ptr<test::TestModel> model_;
};
std::unique_ptr<test::TestModel> KVHeavyTest::model_;

// Every K row of table entry `index` in every layer and head (F32 cache).
std::vector<float> keys_of(const PagedKVCache& kv, int32_t block) {
  std::vector<float> out;
  for (int32_t l = 0; l < kv.shape().n_layer; ++l) {
    const PagedKVView v = kv.layer(l);
    for (int32_t h = 0; h < v.n_head_kv; ++h) {
      const auto* p = reinterpret_cast<const float*>(v.k_tile(block, h));
      out.insert(out.end(), p, p + size_t(v.block_size) * v.head_dim_k);
    }
  }
  return out;
}

// A sequence of 8 computed blocks (sink 1, window 5 of which heavy 3): a slide must drop
// the two lightest of blocks 1..5 (those ending before the last 2 blocks), keep every other
// block's K rows up to its move, and erase the dropped tokens.
TEST_F(KVHeavyTest, SlideDropsTheLightestAndMovesEachRunByWhatWentBefore) {
  const int32_t bs = 16;
  KVCacheShape shape = model().kv_shape(bs);
  shape.dtype = KVDType::F32;
  PagedKVCache kv(shape, 32);
  BlockManager blocks(kv);
  Sequence seq;
  const int32_t n = 8 * bs;
  seq.tokens.resize(n);
  std::iota(seq.tokens.begin(), seq.tokens.end(), 1000);
  seq.n_prompt = n;
  blocks.allocate(seq, n);
  // Give each block recognisable keys: a forward over the tokens.
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int64_t> slots(n);
  for (int32_t i = 0; i < n; ++i) slots[i] = int64_t{seq.block_table[i / bs]} * bs + i % bs;
  const SeqAttention sa{0, n, n, seq.block_table.data()};
  std::vector<int32_t> ids(seq.tokens.begin(), seq.tokens.end());
  for (int32_t& t : ids) t %= model().hparams().n_vocab;
  model().forward(RaggedBatch{ids, positions, slots, {&sa, 1}, {}}, kv, {});
  seq.n_computed = n;
  // Blocks 2 and 4 are the lightest of the candidates 1..5; 6 and 7 (the recent two) are
  // lighter still but never candidates.
  seq.block_mass = {100, 5, 1, 7, 0.5f, 50, 0, 0};

  std::vector<std::vector<float>> before;
  for (int32_t b : seq.block_table) before.push_back(keys_of(kv, b));
  const std::vector<int32_t> table = seq.block_table;

  const KVWindow window(5 * bs, 1, bs, 3 * bs);
  ASSERT_EQ(window.slide(seq, blocks, model()), 2 * bs);
  EXPECT_EQ(seq.block_table,
            (std::vector<int32_t>{table[0], table[1], table[3], table[5], table[6], table[7]}));
  EXPECT_EQ(seq.block_mass, (std::vector<float>{100, 5, 7, 50, 0, 0}));
  EXPECT_EQ(seq.n_computed, 6 * bs);
  EXPECT_EQ(seq.n_prompt, 6 * bs);
  EXPECT_EQ(seq.n_evicted, 2 * bs);
  ASSERT_EQ(seq.tokens.size(), size_t(6 * bs));
  // Tokens of blocks 2 and 4 are gone.
  EXPECT_EQ(seq.tokens[2 * bs], 1000 + 3 * bs);
  EXPECT_EQ(seq.tokens[3 * bs], 1000 + 5 * bs);

  // Each kept block moved down by the blocks dropped before it: rotating it back by that
  // much gives its keys as computed (F32 cache: to rounding).
  const int32_t moved_by[] = {0, 0, 1, 2, 2, 2};  // dropped blocks before each kept one
  const int32_t original[] = {0, 1, 3, 5, 6, 7};
  for (size_t k = 0; k < 6; ++k) {
    const int32_t b = seq.block_table[k];
    if (moved_by[k] > 0) {
      model().shift_kv_positions(kv, std::span(&seq.block_table[k], 1), 0, bs, bs * moved_by[k]);
    }
    const std::vector<float> now = keys_of(kv, b);
    const std::vector<float>& was = before[original[k]];
    ASSERT_EQ(now.size(), was.size());
    double worst = 0;
    for (size_t i = 0; i < now.size(); ++i)
      worst = std::max(worst, double(std::fabs(now[i] - was[i])));
    EXPECT_LT(worst, 1e-4) << "kept block " << k << " was not moved by " << moved_by[k]
                           << " blocks";
  }
  blocks.free(seq);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

// The engine with heavy hitters: past the context with a bounded cache, deterministic,
// different from the plain window once blocks are chosen by attention, nothing leaked.
TEST_F(KVHeavyTest, EngineGeneratesPastTheContextDeterministically) {
  EngineOptions o = test::no_cache_options();
  o.block_size = 16;
  o.max_batched_tokens = 32;
  o.kv_window = 64;
  o.kv_sink = 4;
  o.kv_heavy = 32;
  o.kv_budget = KVBudget::tokens(2048);
  const int32_t want = model().hparams().n_ctx_train + 100;
  const Request r = make_request(test::random_prompt(3, 40, tok().n_vocab()), greedy(want));
  EngineCore heavy(model(), tok(), o);
  const auto a = test::run_alone(heavy, r);
  const auto b = test::run_alone(heavy, r, 2);
  ASSERT_EQ(a.tokens.size(), size_t(want));
  EXPECT_EQ(a.tokens, b.tokens);
  test::expect_all_free(heavy);

  o.kv_heavy = 0;
  EngineCore plain(model(), tok(), o);
  const auto c = test::run_alone(plain, r);
  EXPECT_NE(a.tokens, c.tokens) << "heavy hitters chose the same blocks as the plain window";
}

TEST_F(KVHeavyTest, RejectsImpossibleOptions) {
  EngineOptions o = test::no_cache_options();
  o.kv_heavy = 16;  // without a window
  EXPECT_TRUE(validate(o).has_value());
  o.kv_window = 64;
  o.kv_heavy = 64;  // no recent block left
  EXPECT_TRUE(validate(o).has_value());
  o.kv_heavy = 48;
  EXPECT_FALSE(validate(o).has_value());
}

}  // namespace
}  // namespace tokamak
