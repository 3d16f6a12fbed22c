// Model::forward on tiny synthetic llama models in every weight dtype: against the float64
// reference (per-dtype tolerance), and batch invariance: one-shot prefill, prefill in chunks
// and token-by-token decode give bitwise equal logits, with any thread count.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "model_test_util.h"
#include "reference_llama.h"

namespace tokamak {
namespace {

struct Case {
  const char* name;
  DType weights;
  DType embedding;
  bool tied;
  int32_t n_rot;  // 0 = head dim
  float rope_factor;
  double tol;  // max |logit - ref| / max |ref|
};

const Case kCases[] = {
    {"F32", DType::F32, DType::F32, false, 0, 0.0f, 3e-3},
    {"F16", DType::F16, DType::F16, false, 0, 0.0f, 5e-3},
    {"BF16", DType::BF16, DType::BF16, false, 0, 0.0f, 2e-2},
    {"Q8_0", DType::Q8_0, DType::Q8_0, true, 0, 0.0f, 5e-2},
    {"Q4_0", DType::Q4_0, DType::Q8_0, false, 0, 0.0f, 5e-2},
    {"Q4_1", DType::Q4_1, DType::Q8_0, true, 0, 0.0f, 5e-2},
    {"F32_PartialRopeLinearScaling", DType::F32, DType::F32, false, 8, 2.0f, 3e-3},
    {"Q4_1_PartialRope", DType::Q4_1, DType::Q4_1, false, 8, 0.0f, 5e-2},
};

SyntheticModelSpec spec_for(const Case& c) {
  SyntheticModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = 64;
  s.n_rot = c.n_rot;
  s.rope_scaling_factor = c.rope_factor;
  s.weight_dtype = c.weights;
  s.embedding_dtype = c.embedding;
  s.tied_output = c.tied;
  s.seed = 42;
  return s;
}

using test::iota;
using test::options;

std::vector<int32_t> prompt() {
  return {1, 17, 250, 3, 99, 42, 42, 7, 299, 128, 64};
}

// Runs `tokens` through a fresh cache in chunks of the given sizes; logits of every row.
std::vector<float> run_chunks(Model& model, const std::vector<int32_t>& tokens,
                              const std::vector<int32_t>& chunks) {
  const int32_t n_vocab = model.hparams().n_vocab;
  auto kv = model.new_kv_cache(0);
  std::vector<float> all;
  int32_t done = 0;
  for (int32_t c : chunks) {
    const std::vector<int32_t> toks(tokens.begin() + done, tokens.begin() + done + c);
    const auto pos = iota(done, c);
    const auto rows = iota(0, c);
    std::vector<float> logits(static_cast<size_t>(c) * n_vocab);
    model.forward({toks, pos, rows}, *kv, logits);
    all.insert(all.end(), logits.begin(), logits.end());
    done += c;
  }
  EXPECT_EQ(done, static_cast<int32_t>(tokens.size()));
  EXPECT_EQ(kv->size(), done);
  return all;
}

class LlamaForwardTest : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaForwardTest, MatchesReferenceAndIsBatchInvariant) {
  const Case& c = GetParam();
  test::TempFile tmp(c.name);
  const auto file = test::write_and_open(make_synthetic_model(spec_for(c)), tmp);
  const auto tokens = prompt();
  const int32_t n = static_cast<int32_t>(tokens.size());

  auto model = Model::load(file, options(2, 16));
  const auto one_shot = run_chunks(*model, tokens, {n});

  // Against the float64 reference.
  const test::ReferenceLlama ref(*file);
  const auto want = ref.forward(tokens);
  ASSERT_EQ(want.size(), one_shot.size());
  double max_ref = 0.0, max_err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(one_shot[i]));
    max_ref = std::max(max_ref, std::fabs(want[i]));
    max_err = std::max(max_err, std::fabs(one_shot[i] - want[i]));
  }
  std::printf("%s: max |logit| %.3f, max error %.2e (relative %.2e)\n", c.name, max_ref, max_err,
              max_err / max_ref);
  EXPECT_GT(max_ref, 0.5);
  EXPECT_LE(max_err, c.tol * max_ref);

  // Batch invariance: token by token and uneven chunks equal the one-shot prefill bitwise.
  const auto decode = run_chunks(*model, tokens, std::vector<int32_t>(static_cast<size_t>(n), 1));
  EXPECT_EQ(std::memcmp(decode.data(), one_shot.data(), one_shot.size() * 4), 0);
  const auto chunked = run_chunks(*model, tokens, {4, 4, 3});
  EXPECT_EQ(std::memcmp(chunked.data(), one_shot.data(), one_shot.size() * 4), 0);

  // Thread count does not matter either.
  for (int threads : {1, 3}) {
    auto other = Model::load(file, options(threads, 16));
    const auto again = run_chunks(*other, tokens, {7, 4});
    EXPECT_EQ(std::memcmp(again.data(), one_shot.data(), one_shot.size() * 4), 0)
        << "threads " << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LlamaForwardTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Greedy decode after a prefill follows the reference's argmax, step by step, and only the
// requested logit rows are produced.
TEST(LlamaDecodeTest, GreedyDecodeFollowsReference) {
  SyntheticModelSpec s = spec_for(kCases[0]);
  test::TempFile tmp("decode");
  const auto file = test::write_and_open(make_synthetic_model(s), tmp);
  auto model = Model::load(file, options(2, 8));
  const test::ReferenceLlama ref(*file);
  auto tokens = prompt();
  tokens.resize(6);
  auto kv = model->new_kv_cache(32);
  std::vector<float> logits(static_cast<size_t>(s.n_vocab));
  const auto pos = iota(0, 6);
  const std::vector<int32_t> last = {5};
  model->forward({tokens, pos, last}, *kv, logits);
  for (int step = 0; step < 8; ++step) {
    const auto want = ref.forward(tokens);
    const double* row = want.data() + (tokens.size() - 1) * s.n_vocab;
    double max_ref = 0.0;
    for (int32_t v = 0; v < s.n_vocab; ++v) max_ref = std::max(max_ref, std::fabs(row[v]));
    for (int32_t v = 0; v < s.n_vocab; ++v) EXPECT_NEAR(logits[v], row[v], 3e-3 * max_ref);
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    tokens.push_back(next);
    const std::vector<int32_t> t1 = {next};
    const std::vector<int32_t> p1 = {static_cast<int32_t>(tokens.size()) - 1};
    const std::vector<int32_t> r1 = {0};
    model->forward({t1, p1, r1}, *kv, logits);
  }
  EXPECT_EQ(kv->size(), static_cast<int32_t>(tokens.size()));
}

// llama.cpp's single-token rounding (ModelOptions::llama_cpp_decode_rounding): batches of two or
// more tokens still agree bitwise with each other; single-token steps round differently but
// stay within rounding of the multi-token result.
TEST(LlamaDecodeTest, LlamaCppDecodeRoundingOption) {
  SyntheticModelSpec s = spec_for(kCases[5]);  // Q4_1 weights, tied Q8_0 head
  test::TempFile tmp("compat");
  const auto file = test::write_and_open(make_synthetic_model(s), tmp);
  ModelOptions opts = options(2, 16);
  opts.llama_cpp_decode_rounding = true;
  auto model = Model::load(file, opts);
  const auto tokens = prompt();
  const int32_t n = static_cast<int32_t>(tokens.size());
  const auto one_shot = run_chunks(*model, tokens, {n});
  const auto chunked = run_chunks(*model, tokens, {4, 5, 2});
  EXPECT_EQ(std::memcmp(chunked.data(), one_shot.data(), one_shot.size() * 4), 0);
  const auto decode = run_chunks(*model, tokens, std::vector<int32_t>(static_cast<size_t>(n), 1));
  double max_ref = 0.0, max_err = 0.0;
  for (size_t i = 0; i < one_shot.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(one_shot[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(one_shot[i]) - decode[i]));
  }
  EXPECT_LE(max_err, 5e-2 * max_ref);
  // Without the option the same model is batch invariant (checked bitwise above for every dtype).
}

TEST(LlamaDecodeTest, RejectsBadBatches) {
  SyntheticModelSpec s = spec_for(kCases[0]);
  test::TempFile tmp("bad_batch");
  const auto file = test::write_and_open(make_synthetic_model(s), tmp);
  auto model = Model::load(file, options(1, 4));
  auto kv = model->new_kv_cache(6);
  std::vector<float> logits(static_cast<size_t>(s.n_vocab));
  const std::vector<int32_t> five = {1, 2, 3, 4, 5}, p5 = iota(0, 5), r0 = {0};
  EXPECT_THROW(model->forward({five, p5, r0}, *kv, logits), Error);  // > max_batch_tokens
  const std::vector<int32_t> t1 = {1}, bad_pos = {3};
  EXPECT_THROW(model->forward({t1, bad_pos, r0}, *kv, logits), Error);  // not continuing
  const std::vector<int32_t> bad_tok = {300}, p0 = {0};
  EXPECT_THROW(model->forward({bad_tok, p0, r0}, *kv, logits), Error);  // out of vocabulary
  std::vector<float> small(10);
  EXPECT_THROW(model->forward({t1, p0, r0}, *kv, small), Error);  // logits too small
  const std::vector<int32_t> two = {1, 2}, p2 = iota(0, 2), desc = {1, 0};
  std::vector<float> two_rows(2 * static_cast<size_t>(s.n_vocab));
  EXPECT_THROW(model->forward({two, p2, desc}, *kv, two_rows), Error);  // not ascending
  EXPECT_EQ(kv->size(), 0);
  // Filling the cache, then one more token.
  const std::vector<int32_t> four = {1, 2, 3, 4}, p4 = iota(0, 4);
  model->forward({four, p4, {}}, *kv, {});
  model->forward({two, iota(4, 2), {}}, *kv, {});
  EXPECT_EQ(kv->size(), 6);
  const std::vector<int32_t> p6 = {6};
  EXPECT_THROW(model->forward({t1, p6, r0}, *kv, logits), Error);  // context full
}

}  // namespace
}  // namespace tokamak
