// Bit-exact agreement with llama.cpp on the default model: replays the prompts of the golden
// file made by llama.cpp (tests/golden/generation/smollm2-q4_1.json) with llama.cpp's own
// tokens fed back (teacher forcing) and compares the recorded top-5 logits for equality.
// The file records llama.cpp two ways: "top5"/"greedy" with every step computed as prompt
// processing (what our batch-invariant default reproduces) and, where present,
// "top5_decode_path"/"greedy_decode_path" through its one-token decode (reproduced with
// ModelOptions::llama_cpp_decode_rounding). Uses the AVX2 kernels on GGUF's layout (llama.cpp's
// reference build was AVX2; ModelOptions::repack_weights off); skipped without the model.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_test_util.h"

namespace tokamak {
namespace {

void replay(bool decode_path) {
  namespace fs = std::filesystem;
  const fs::path golden_path =
      fs::path(TOKAMAK_SOURCE_DIR) / "tests/golden/generation/smollm2-q4_1.json";
  const fs::path model_path =
      fs::path(TOKAMAK_SOURCE_DIR) / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(golden_path) || !fs::exists(model_path)) GTEST_SKIP() << "no golden data";
  if (best_isa(cpu_features()) < Isa::Avx2) GTEST_SKIP() << "needs AVX2";
  std::ifstream in(golden_path);
  const auto golden = nlohmann::json::parse(in);

  const std::string greedy_key = decode_path ? "greedy_decode_path" : "greedy";
  const std::string top5_key = decode_path ? "top5_decode_path" : "top5";
  if (!golden["prompts"][0].contains(top5_key)) GTEST_SKIP() << "golden file has no " << top5_key;
  ModelOptions opts = test::options(2, 512);
  opts.isa = Isa::Avx2;
  opts.repack_weights = false;
  opts.llama_cpp_decode_rounding = decode_path;
  auto model = Model::load(test::open_shared(model_path.string()), opts);
  const int32_t n_vocab = model->hparams().n_vocab;
  int prompts = 0;
  for (const auto& rec : golden["prompts"]) {
    const auto prompt = rec["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = rec[greedy_key].get<std::vector<int32_t>>();
    const auto& top5 = rec[top5_key];
    auto kv = model->new_kv_cache(static_cast<int32_t>(prompt.size() + top5.size() + 1));
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    for (size_t s = 0; s < prompt.size(); s += 512) {
      const size_t n = std::min<size_t>(512, prompt.size() - s);
      std::vector<int32_t> pos(n);
      for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(s + i);
      const int32_t row = static_cast<int32_t>(n) - 1;
      model->forward({std::span(prompt).subspan(s, n), pos, std::span(&row, 1)}, *kv, logits);
    }
    for (size_t step = 0; step < top5.size(); ++step) {
      for (const auto& pair : top5[step]) {
        EXPECT_EQ(logits[pair[0].get<size_t>()], pair[1].get<float>())
            << rec["name"] << " step " << step << " token " << pair[0];
      }
      if (step + 1 >= greedy.size()) break;
      const int32_t t = greedy[step], p = kv->size(), r = 0;
      model->forward({std::span(&t, 1), std::span(&p, 1), std::span(&r, 1)}, *kv, logits);
    }
    ++prompts;
  }
  EXPECT_GE(prompts, 20);
}

TEST(DefaultModelGoldenLogits, PromptProcessingPathBitForBit) {
  replay(false);
}

TEST(DefaultModelGoldenLogits, DecodePathBitForBit) {
  replay(true);
}

}  // namespace
}  // namespace tokamak
