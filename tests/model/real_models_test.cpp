// End to end on real weights: stories260K (F32, in shared/testdata) and the default model
// SmolLM2-135M-Instruct Q4_1 (skipped when models/ does not have it; the DefaultModel suite
// is left out of the sanitizer run). Greedy decoding must give finite logits and the same
// tokens, bit for bit, whatever the thread count and whether the prompt is prefilled at once
// or token by token.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_test_util.h"

namespace tokamak::real_models_test {
namespace {

using test::default_model_path;

struct Run {
  std::vector<int32_t> tokens;  // generated
  std::vector<float> logits;    // of every step, concatenated
};

// Prefills `prompt` in chunks of `chunk`, then decodes greedily for `steps` tokens.
Run greedy(Model& model, const std::vector<int32_t>& prompt, int steps, int32_t chunk) {
  const int32_t n_vocab = model.hparams().n_vocab;
  auto kv = model.new_kv_cache(static_cast<int32_t>(prompt.size()) + steps + 1);
  Run run;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  int32_t done = 0;
  const int32_t n = static_cast<int32_t>(prompt.size());
  while (done < n) {
    const int32_t c = std::min(chunk, n - done);
    std::vector<int32_t> pos(static_cast<size_t>(c));
    for (int32_t i = 0; i < c; ++i) pos[i] = done + i;
    const std::vector<int32_t> last = {c - 1};
    const std::vector<int32_t> toks(prompt.begin() + done, prompt.begin() + done + c);
    model.forward(
        {toks, pos, done + c == n ? std::span<const int32_t>(last) : std::span<const int32_t>()},
        *kv, done + c == n ? std::span<float>(logits) : std::span<float>());
    done += c;
  }
  for (int step = 0; step < steps; ++step) {
    for (float v : logits) EXPECT_TRUE(std::isfinite(v));
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    run.tokens.push_back(next);
    const std::vector<int32_t> t = {next};
    const std::vector<int32_t> p = {kv->size()};
    const std::vector<int32_t> r = {0};
    model.forward({t, p, r}, *kv, logits);
  }
  return run;
}

// Text of tokens from the file's vocabulary (SentencePiece or GPT-2 byte-level pieces,
// shown roughly: for eyes only).
std::string detok(const gguf::File& f, const std::vector<int32_t>& tokens) {
  const auto* vocab = f.get_array("tokenizer.ggml.tokens");
  std::string out;
  for (int32_t t : tokens) {
    if (vocab == nullptr || t >= static_cast<int32_t>(vocab->size())) continue;
    const std::string& piece = (*vocab)[static_cast<size_t>(t)].as_string();
    if (piece == "\xc4\x8a" || piece == "<0x0A>") {
      out += '\n';
      continue;
    }
    for (size_t i = 0; i < piece.size();) {
      // U+2581 (SentencePiece) and U+0120 (GPT-2 bytes) stand for a space.
      if (piece.compare(i, 3, "\xe2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else if (piece.compare(i, 2, "\xc4\xa0") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += piece[i++];
      }
    }
  }
  return out;
}

void check_model(const std::string& path, const std::vector<int32_t>& prompt, int steps) {
  const auto file = test::open_shared(path);
  auto one = Model::load(file, test::options(1, 64));
  auto two = Model::load(file, test::options(2, 64));
  const Run a = greedy(*one, prompt, steps, 64);
  const Run b = greedy(*two, prompt, steps, 64);
  const Run c = greedy(*two, prompt, steps, 1);  // prompt token by token
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens, c.tokens);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.logits.data(), c.logits.data(), a.logits.size() * 4), 0);
  std::string ids;
  for (int32_t t : a.tokens) ids += std::to_string(t) + " ";
  std::printf("%s\n  tokens: %s\n  text: %s|%s\n", path.c_str(), ids.c_str(),
              detok(*file, prompt).c_str(), detok(*file, a.tokens).c_str());
}

TEST(Stories260KTest, GreedyFromBosIsFiniteAndDeterministic) {
  const std::string path = std::string(TOKAMAK_SHARED_DIR) + "/testdata/stories260K.gguf";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  check_model(path, {1}, 32);
}

TEST(Stories260KTest, LoadsHyperParameters) {
  const auto file =
      test::open_shared(std::string(TOKAMAK_SHARED_DIR) + "/testdata/stories260K.gguf");
  auto model = Model::load(file, test::options(1, 8));
  const HParams& hp = model->hparams();
  EXPECT_EQ(hp.n_layer, 5);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_head, 8);
  EXPECT_EQ(hp.n_head_kv, 4);
  EXPECT_EQ(hp.n_rot, 8);
  EXPECT_EQ(hp.head_dim_k, 8);
  EXPECT_EQ(hp.n_ff, 172);
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_FLOAT_EQ(hp.rope_freq_base, 10000.0f);
}

TEST(DefaultModelTest, GreedyContinuationIsFiniteAndDeterministic) {
  if (!std::filesystem::exists(default_model_path())) GTEST_SKIP() << "default model missing";
  // "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
  // as SmolLM2's tokenizer encodes it.
  const std::vector<int32_t> prompt = {1,    4093, 198, 1780, 314, 260, 3575, 282,
                                       4649, 47,   2,   198,  1,   520, 9531, 198};
  check_model(default_model_path(), prompt, 16);
}

TEST(DefaultModelTest, HyperParameters) {
  if (!std::filesystem::exists(default_model_path())) GTEST_SKIP() << "default model missing";
  auto model = Model::load(test::open_shared(default_model_path()), test::options(1, 8));
  const HParams& hp = model->hparams();
  EXPECT_EQ(hp.n_layer, 30);
  EXPECT_EQ(hp.n_embd, 576);
  EXPECT_EQ(hp.n_head, 9);
  EXPECT_EQ(hp.n_head_kv, 3);
  EXPECT_EQ(hp.head_dim_k, 64);
  EXPECT_EQ(hp.n_ff, 1536);
  EXPECT_EQ(hp.n_vocab, 49152);
  EXPECT_FLOAT_EQ(hp.rope_freq_base, 100000.0f);
}

}  // namespace
}  // namespace tokamak::real_models_test
