// KV tiers in the engine: a prompt whose cached prefix the pool evicted is served from host
// memory, or from disk after a restart (a fresh EngineCore over the same directory), with
// greedy outputs identical to a run without any cache, and the tier counters show the hits;
// another model's entries, and a damaged file, are rejected and recomputed instead.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "format/gguf_identity.h"

namespace tokamak {
namespace {

namespace fs = std::filesystem;
using test::greedy;
using test::make_request;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tokamak_engine_tiers_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

class EngineKVTiersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = test::load_synthetic(test::small_spec());
    const int32_t vocab = model_->tok->n_vocab();
    prompt_ = test::random_prompt(21, 70, vocab);  // 4 full blocks of 16, and 6 tokens
    for (uint64_t s = 0; s < 3; ++s) others_.push_back(test::random_prompt(40 + s, 60, vocab));
    EngineCore solo(*model_->model, *model_->tok, test::no_cache_options());
    solo_ = test::run_alone(solo, make_request(prompt_, greedy(8)));
  }
  static void TearDownTestSuite() { model_.reset(); }

  // A pool of 8 blocks of 16 tokens: one more 60-token prompt evicts the earlier ones.
  static EngineOptions options() {
    EngineOptions o = test::roomy_options();
    o.kv_budget = KVBudget::tokens(128);
    o.kv_tiers.model_identity = gguf::content_identity(*model_->gguf);
    return o;
  }

  static test::SampleResult run(EngineCore& core, const std::vector<int32_t>& prompt, uint64_t id) {
    return test::run_alone(core, make_request(prompt, greedy(8)), id);
  }

  static std::unique_ptr<test::TestModel> model_;
  static std::vector<int32_t> prompt_;
  static std::vector<std::vector<int32_t>> others_;
  static test::SampleResult solo_;
};

std::unique_ptr<test::TestModel> EngineKVTiersTest::model_;
std::vector<int32_t> EngineKVTiersTest::prompt_;
std::vector<std::vector<int32_t>> EngineKVTiersTest::others_;
test::SampleResult EngineKVTiersTest::solo_;

TEST_F(EngineKVTiersTest, AnEvictedPrefixIsServedFromHostMemory) {
  EngineOptions o = options();
  o.kv_tiers.host_bytes = size_t{64} << 20;
  EngineCore core(*model_->model, *model_->tok, o);
  EXPECT_EQ(run(core, prompt_, 1).tokens, solo_.tokens);
  uint64_t id = 2;
  for (const auto& other : others_) run(core, other, id++);  // pushes the prompt's blocks out
  const EngineStats before = core.stats();
  EXPECT_GE(before.kv_tiers.host_stores, 4);
  EXPECT_EQ(before.kv_tiers.host_hits, 0);

  const test::SampleResult again = run(core, prompt_, id++);
  EXPECT_EQ(again.tokens, solo_.tokens)
      << "\n   got: " << test::str(again.tokens) << "\n  solo: " << test::str(solo_.tokens);
  EXPECT_EQ(again.text, solo_.text);
  const EngineStats after = core.stats();
  EXPECT_EQ(after.kv_tiers.host_hits, 4) << "the prompt's 4 full blocks came from host memory";
  EXPECT_EQ(after.prefix_cache_hits - before.prefix_cache_hits, 64);
  EXPECT_EQ(after.prompt_tokens_computed - before.prompt_tokens_computed, 70 - 64);
  ASSERT_TRUE(again.metrics);
  EXPECT_EQ(again.metrics->cached_prompt_tokens, 64);
  test::expect_all_free(core);
}

TEST_F(EngineKVTiersTest, WithoutTiersTheSamePrefixIsRecomputed) {
  // The control of the test above: same workload, no tier, no hit.
  EngineCore core(*model_->model, *model_->tok, options());
  run(core, prompt_, 1);
  uint64_t id = 2;
  for (const auto& other : others_) run(core, other, id++);
  const EngineStats before = core.stats();
  EXPECT_EQ(run(core, prompt_, id).tokens, solo_.tokens);
  EXPECT_EQ(core.stats().prefix_cache_hits, before.prefix_cache_hits);
  EXPECT_EQ(core.stats().prompt_tokens_computed - before.prompt_tokens_computed, 70);
}

TEST_F(EngineKVTiersTest, APrefixOnDiskIsServedAfterARestart) {
  TempDir dir;
  EngineOptions o = options();
  o.kv_tiers.host_bytes = size_t{64} << 20;
  o.kv_tiers.disk_dir = dir.path.string();
  o.kv_tiers.disk_bytes = size_t{64} << 20;
  {
    EngineCore core(*model_->model, *model_->tok, o);
    run(core, prompt_, 1);
    core.clear_prefix_cache();  // pool -> host
    core.flush_host_tier();     // host -> disk
    const EngineStats st = core.stats();
    EXPECT_EQ(st.kv_tiers.host_entries, 0u);
    EXPECT_EQ(st.kv_tiers.disk_stores, 4) << "70 tokens: 4 full blocks cached";
  }
  EngineCore core(*model_->model, *model_->tok, o);
  EXPECT_EQ(core.stats().kv_tiers.disk_entries, 4u);
  const test::SampleResult again = run(core, prompt_, 2);
  EXPECT_EQ(again.tokens, solo_.tokens);
  EXPECT_EQ(again.text, solo_.text);
  const EngineStats st = core.stats();
  EXPECT_EQ(st.kv_tiers.disk_hits, 4);
  EXPECT_EQ(st.kv_tiers.disk_rejected, 0);
  EXPECT_EQ(st.prefix_cache_hits, 64);
  EXPECT_EQ(st.prompt_tokens_computed, 70 - 64);
  test::expect_all_free(core);
}

TEST_F(EngineKVTiersTest, AnotherModelsEntriesAndDamagedFilesAreRecomputed) {
  TempDir dir;
  EngineOptions o = options();
  o.kv_tiers.disk_dir = dir.path.string();  // no host tier: evictions go straight to disk
  o.kv_tiers.disk_bytes = size_t{64} << 20;
  {
    EngineCore core(*model_->model, *model_->tok, o);
    run(core, prompt_, 1);
    core.clear_prefix_cache();
    EXPECT_EQ(core.stats().kv_tiers.disk_stores, 4);
  }
  // Another model (same shapes, other weights) over the same directory: a different
  // identity; its scan removes every entry, and it computes the prompt itself.
  SyntheticModelSpec spec = test::small_spec();
  spec.seed = 8;
  const auto other = test::load_synthetic(spec);
  EngineOptions oo = o;
  oo.kv_tiers.model_identity = gguf::content_identity(*other->gguf);
  ASSERT_NE(*oo.kv_tiers.model_identity, *o.kv_tiers.model_identity);
  {
    EngineCore core(*other->model, *other->tok, oo);
    EXPECT_EQ(core.stats().kv_tiers.disk_rejected, 4);
    EXPECT_EQ(core.stats().kv_tiers.disk_entries, 0u);
    run(core, prompt_, 1);
    EXPECT_EQ(core.stats().kv_tiers.disk_hits, 0);
  }
  // Ours again, after a byte of the third block's file is flipped: blocks 1 and 2 come
  // from disk, the third is rejected (and removed), the rest is recomputed.
  {
    EngineCore core(*model_->model, *model_->tok, o);
    run(core, prompt_, 1);
    core.clear_prefix_cache();
  }
  BlockKey key = kRootBlockKey;
  for (int b = 0; b < 3; ++b) {
    key = chain_block_key(key, std::span(prompt_).subspan(size_t(b) * 16, 16));
  }
  const fs::path third = dir.path / (block_key_hex(key) + ".kvb");
  ASSERT_TRUE(fs::exists(third));
  {
    std::fstream f(third, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  EngineCore core(*model_->model, *model_->tok, o);
  EXPECT_EQ(core.stats().kv_tiers.disk_rejected, 1);
  EXPECT_FALSE(fs::exists(third));
  const test::SampleResult again = run(core, prompt_, 2);
  EXPECT_EQ(again.tokens, solo_.tokens);
  EXPECT_EQ(core.stats().kv_tiers.disk_hits, 2);
  EXPECT_EQ(core.stats().prompt_tokens_computed, 70 - 32);
  test::expect_all_free(core);
}

TEST_F(EngineKVTiersTest, ADiskTierNeedsTheModelIdentity) {
  TempDir dir;
  EngineOptions o = options();
  o.kv_tiers.model_identity.reset();
  o.kv_tiers.disk_dir = dir.path.string();
  o.kv_tiers.disk_bytes = 1 << 20;
  EXPECT_THROW(EngineCore(*model_->model, *model_->tok, o), Error);
  o.kv_tiers.model_identity = gguf::content_identity(*model_->gguf);
  o.prefix_caching = false;
  EXPECT_THROW(EngineCore(*model_->model, *model_->tok, o), Error);
}

}  // namespace
}  // namespace tokamak
