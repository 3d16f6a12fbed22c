#include "model/synthetic_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/quantize_model.h"
#include "model_test_util.h"

namespace tokamak {
namespace {

TEST(SyntheticModelTest, WritesAValidLlamaFileWithVocabulary) {
  SyntheticModelSpec s;
  s.n_vocab = 400;
  s.weight_dtype = DType::Q4_0;
  s.embedding_dtype = DType::F16;
  s.tied_output = true;
  test::TempFile tmp("synthetic");
  const auto file = test::write_and_open(make_synthetic_model(s), tmp);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(file->get_int("tokenizer.ggml.bos_token_id"), 1);
  const auto* tokens = file->get_array("tokenizer.ggml.tokens");
  const auto* types = file->get_array("tokenizer.ggml.token_type");
  const auto* scores = file->get_array("tokenizer.ggml.scores");
  ASSERT_TRUE(tokens && types && scores);
  ASSERT_EQ(tokens->size(), 400u);
  ASSERT_EQ(types->size(), 400u);
  ASSERT_EQ(scores->size(), 400u);
  EXPECT_EQ((*tokens)[0].as_string(), "<unk>");
  EXPECT_EQ((*tokens)[1].as_string(), "<s>");
  EXPECT_EQ((*tokens)[2].as_string(), "</s>");
  EXPECT_EQ((*tokens)[3].as_string(), "<0x00>");
  EXPECT_EQ((*tokens)[3 + 0x41].as_string(), "<0x41>");
  EXPECT_EQ((*types)[3 + 0x41].as_i64(), 6);
  EXPECT_EQ((*tokens)[259].as_string(), "\xe2\x96\x81");
  EXPECT_EQ((*tokens)[260].as_string(), "a");
  EXPECT_EQ((*types)[260].as_i64(), 1);
  EXPECT_EQ(file->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(file->find_tensor("blk.1.ffn_down.weight")->dtype, DType::Q4_0);
  EXPECT_EQ(file->find_tensor("token_embd.weight")->dtype, DType::F16);
  const HParams hp = HParams::from_gguf(*file);
  EXPECT_EQ(hp.n_vocab, 400);

  // It runs, with finite logits of a sensible size, on a pool the caller owns.
  ThreadPool pool(2);
  ModelOptions opts;
  opts.pool = &pool;
  auto model = Model::load(file, opts);
  EXPECT_EQ(model->new_kv_cache(0)->n_ctx(), 256);
  test::expect_sensible_logits(*model, {1, 300, 5});
}

TEST(SyntheticModelTest, SameSeedSameBytes) {
  SyntheticModelSpec s;
  s.weight_dtype = DType::Q4_1;
  const auto a = make_synthetic_model(s).to_writer().to_bytes();
  const auto b = make_synthetic_model(s).to_writer().to_bytes();
  EXPECT_EQ(a, b);
  s.seed = 2;
  EXPECT_NE(a, make_synthetic_model(s).to_writer().to_bytes());
}

// got differs from ref by at most 0.1% of ref's largest magnitude.
void expect_within_rounding(const std::vector<float>& ref, const std::vector<float>& got,
                            std::string_view what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  double max_ref = 0.0, max_err = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(ref[i]) - got[i]));
  }
  EXPECT_LE(max_err, 1e-3 * max_ref) << what;
}

// Every ISA computes the same model to within rounding.
TEST(SyntheticModelTest, IsasAgree) {
  SyntheticModelSpec s;
  s.weight_dtype = DType::Q4_1;
  s.embedding_dtype = DType::Q8_0;
  s.tied_output = true;
  test::TempFile tmp("isas");
  const auto file = test::write_and_open(make_synthetic_model(s), tmp);
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6}, pos = {0, 1, 2, 3, 4, 5}, rows = {5};
  std::vector<float> ref;
  for (Isa isa : kIsaLevels) {
    if (!isa_supported(cpu_features(), isa)) continue;
    ModelOptions opts = test::options(2, 8);
    opts.isa = isa;
    auto model = Model::load(file, opts);
    auto kv = model->new_kv_cache(0);
    std::vector<float> logits(static_cast<size_t>(s.n_vocab));
    model->forward({toks, pos, rows}, *kv, logits);
    if (ref.empty()) {
      ref = logits;
      continue;
    }
    expect_within_rounding(ref, logits, isa_name(isa));
  }
}

// A decode token reads every tensor of the file once but the embedding table, of which it
// reads one row, unless the output head is that table: whatever form the backend computes
// with (repacked, stacked, gated or GGUF's own), on every level.
TEST(SyntheticModelTest, DecodeWeightBytesCountEveryTensorOnce) {
  for (const DType weights : {DType::Q8_0, DType::Q4_0, DType::F16}) {
    for (const bool tied : {false, true}) {
      SyntheticModelSpec s;
      s.weight_dtype = weights;
      s.embedding_dtype = DType::Q8_0;
      s.tied_output = tied;
      test::TempFile tmp("decode_bytes");
      const auto file = test::write_and_open(make_synthetic_model(s), tmp);
      int64_t expected = 0;
      for (const gguf::TensorInfo& t : file->tensors()) {
        if (t.name != "token_embd.weight" || tied) expected += static_cast<int64_t>(t.nbytes);
      }
      expected += static_cast<int64_t>(row_bytes(DType::Q8_0, s.n_embd));
      for (Isa isa : kIsaLevels) {
        if (!isa_supported(cpu_features(), isa)) continue;
        for (const bool repack : {true, false}) {
          ModelOptions opts = test::options(2, 8);
          opts.isa = isa;
          opts.repack_weights = repack;
          const auto model = Model::load(file, opts);
          EXPECT_EQ(model->decode_weight_bytes(), expected)
              << dtype_name(weights) << (tied ? " tied" : " untied") << " " << isa_name(isa)
              << (repack ? " repacked" : "");
        }
      }
    }
  }
}

// A token's matmul arithmetic is two operations for every element of every layer matrix (the
// blk.* tensors of rank 2), whatever form the backend computes with; attention's is two per
// head dimension of the scores and of the values, per head and layer, for each (query, key).
TEST(SyntheticModelTest, FlopCountsFollowTheLayerMatrices) {
  for (const bool gqa : {false, true}) {
    SyntheticModelSpec s;
    s.weight_dtype = DType::Q8_0;
    s.n_head_kv = gqa ? 2 : 4;
    test::TempFile tmp("flops");
    const auto file = test::write_and_open(make_synthetic_model(s), tmp);
    int64_t matrix_elements = 0;
    for (const gguf::TensorInfo& t : file->tensors()) {
      if (t.name.rfind("blk.", 0) == 0 && t.shape.size() == 2) matrix_elements += t.n_elements();
    }
    ASSERT_GT(matrix_elements, 0);
    for (const bool repack : {true, false}) {
      ModelOptions opts = test::options(2, 8);
      opts.repack_weights = repack;
      const auto model = Model::load(file, opts);
      EXPECT_EQ(model->matmul_flops_per_token(), 2 * matrix_elements);
      const int64_t head_dim = s.n_embd / s.n_head;
      EXPECT_EQ(model->attention_flops_per_pair(),
                int64_t{s.n_layer} * s.n_head * 2 * (head_dim + head_dim));
    }
  }
}

// The repacked layout gives the same bits on every level that has it (the AVX2, AVX-512 and
// AMX kernels share the reference's arithmetic), stays within rounding of GGUF's layout, and
// TOKAMAK_REPACK=0 selects GGUF's layout as ModelOptions::repack_weights does. A prompt of 53
// tokens runs three of AMX's 16-row tiles and a rest, whose logits are compared too.
TEST(SyntheticModelTest, RepackedLayoutIsTheSameOnEveryLevelAndCloseToGguf) {
  SyntheticModelSpec s;
  s.weight_dtype = DType::Q4_1;
  s.embedding_dtype = DType::Q8_0;
  s.tied_output = true;
  test::TempFile tmp("repack");
  const auto file = test::write_and_open(make_synthetic_model(s), tmp);
  std::vector<int32_t> toks, pos;
  for (int32_t t = 0; t < 53; ++t) {
    toks.push_back(1 + t % 9);
    pos.push_back(t);
  }
  const std::vector<int32_t> rows = {5, 20, 52};
  const auto logits_of = [&](Isa isa, bool repack) {
    ModelOptions opts = test::options(2, 64);
    opts.isa = isa;
    opts.repack_weights = repack;
    auto model = Model::load(file, opts);
    auto kv = model->new_kv_cache(0);
    std::vector<float> logits(rows.size() * static_cast<size_t>(s.n_vocab));
    model->forward({toks, pos, rows}, *kv, logits);
    return logits;
  };
  if (best_isa(cpu_features()) < Isa::Avx2) GTEST_SKIP() << "no level here repacks";
  const std::vector<float> packed = logits_of(Isa::Avx2, true);
  const std::vector<float> gguf = logits_of(Isa::Avx2, false);
  EXPECT_NE(packed, gguf);  // the layouts round differently, so the switch did something
  expect_within_rounding(gguf, packed, "repacked");
  for (Isa isa : {Isa::AvxVnni, Isa::Avx512, Isa::Amx}) {
    if (isa_supported(cpu_features(), isa)) {
      EXPECT_EQ(logits_of(isa, true), packed) << isa_name(isa);
    }
  }

  const char* old = std::getenv("TOKAMAK_REPACK");
  const std::string saved = old != nullptr ? old : "";
  setenv("TOKAMAK_REPACK", "0", 1);
  EXPECT_EQ(logits_of(Isa::Avx2, true), gguf);
  setenv("TOKAMAK_REPACK", "yes", 1);
  EXPECT_THROW(logits_of(Isa::Avx2, true), Error);
  if (old != nullptr) {
    setenv("TOKAMAK_REPACK", saved.c_str(), 1);
  } else {
    unsetenv("TOKAMAK_REPACK");
  }
}

// The 5-bit and K-quant weight types run the whole model (matrices, the embedding lookup and
// the tied head) on every level, close to the same model with its weights decoded to F32 by
// `quantize` (what remains is the activations' 8-bit encoding: measured 0.6-1.5% of the
// largest logit). Levels that compute a type in GGUF's layout agree within rounding; packed Q4_K
// (as Q4_1 blocks, with Q8_1 activations) and Q6_K (8-bit quants with Q8_0 activations) are
// as close to the F32 model as GGUF's layout is.
TEST(SyntheticModelTest, FiveBitAndKQuantModels) {
  const auto max_error = [](const std::vector<float>& ref, const std::vector<float>& got) {
    double max_ref = 0.0;
    double max_err = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(ref[i]) - got[i]));
    }
    EXPECT_GT(max_ref, 0.1);
    return max_err / max_ref;
  };
  for (const DType w : {DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SyntheticModelSpec s;
    s.n_embd = 256;  // whole K-quant super-blocks
    s.n_ff = 512;
    s.weight_dtype = w;
    s.embedding_dtype = w;
    s.tied_output = true;
    test::TempFile quantized("kquant");
    test::TempFile decoded("kquant_f32");
    const auto file = test::write_and_open(make_synthetic_model(s), quantized);
    quantize_model(quantized.path(), decoded.path(), DType::F32);
    const auto f32_file = test::open_shared(decoded.path());
    EXPECT_EQ(f32_file->find_tensor("blk.0.ffn_down.weight")->dtype, DType::F32);
    const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6}, pos = {0, 1, 2, 3, 4, 5}, rows = {5};
    const auto logits_of = [&](const std::shared_ptr<const gguf::File>& f, Isa isa) {
      ModelOptions opts = test::options(2, 8);
      opts.isa = isa;
      auto model = Model::load(f, opts);
      auto kv = model->new_kv_cache(0);
      std::vector<float> logits(static_cast<size_t>(s.n_vocab));
      model->forward({toks, pos, rows}, *kv, logits);
      return logits;
    };
    const std::vector<float> ref = logits_of(f32_file, Isa::Scalar);
    const std::vector<float> scalar = logits_of(file, Isa::Scalar);
    const double scalar_err = max_error(ref, scalar);
    EXPECT_LE(scalar_err, 0.03) << dtype_name(w) << ": scalar against the decoded weights";
    for (Isa isa : {Isa::Avx2, Isa::AvxVnni, Isa::Avx512, Isa::Amx}) {
      if (!isa_supported(cpu_features(), isa)) continue;
      const std::string what = std::string(dtype_name(w)) + " " + std::string(isa_name(isa));
      const std::vector<float> simd = logits_of(file, isa);
      if (w == DType::Q4_K || w == DType::Q6_K) {
        EXPECT_LE(max_error(ref, simd), 1.2 * scalar_err) << what << " against the decoded weights";
      } else {
        expect_within_rounding(scalar, simd, what);
      }
    }
  }
}

}  // namespace
}  // namespace tokamak
