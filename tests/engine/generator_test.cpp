// The single-sequence generator on the real stories260K model (../shared/testdata).

#include "engine/generator.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "format/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::make_shared<const gguf::File>(
        gguf::File::open(std::string(TOKAMAK_SHARED_DIR) + "/testdata/stories260K.gguf"));
    ModelOptions opts;
    opts.n_threads = 2;
    model_ = Model::load(file_, opts);
    tok_ = Tokenizer::from_gguf(*file_);
    prompt_ = tok_->encode("Once upon a time", /*add_special=*/true, /*parse_special=*/false);
  }

  static SamplingParams greedy(int32_t max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    return p;
  }

  std::shared_ptr<const gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<int32_t> prompt_;
};

TEST_F(GeneratorTest, GreedyStopsAtMaxTokensAndStreamsTheDecodedText) {
  Generator gen(*model_, *tok_, 256);
  std::string streamed;
  const auto r = gen.generate(prompt_, greedy(12), [&](std::string_view piece) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(r.finish, FinishReason::Length);
  ASSERT_EQ(r.tokens.size(), 12u);
  EXPECT_EQ(r.stats.generated_tokens, 12);
  EXPECT_EQ(r.text, streamed);
  EXPECT_EQ(r.text, tok_->decode(r.tokens));
  EXPECT_NE(r.text.find("there was"), std::string::npos) << r.text;
}

TEST_F(GeneratorTest, StopStringEndsGenerationAndIsNotEmitted) {
  Generator gen(*model_, *tok_, 256);
  const auto full = gen.generate(prompt_, greedy(24));
  const size_t at = full.text.find("little");
  ASSERT_NE(at, std::string::npos) << full.text;

  auto params = greedy(24);
  params.stop = {"little"};
  gen.reset();
  const auto r = gen.generate(prompt_, params);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.text, full.text.substr(0, at));
}

TEST_F(GeneratorTest, ReusedPrefixGivesTheSameContinuationAsAFreshCache) {
  Generator gen(*model_, *tok_, 256);
  const auto first = gen.generate(prompt_, greedy(8));
  std::vector<int32_t> longer = prompt_;
  longer.insert(longer.end(), first.tokens.begin(), first.tokens.end());

  const auto reused = gen.generate(longer, greedy(8));
  // Everything but the newest token was already in the cache.
  EXPECT_EQ(reused.stats.reused_tokens, static_cast<int32_t>(longer.size()) - 1);

  Generator fresh(*model_, *tok_, 256);
  const auto from_scratch = fresh.generate(longer, greedy(8));
  EXPECT_EQ(from_scratch.stats.reused_tokens, 0);
  EXPECT_EQ(reused.tokens, from_scratch.tokens);
}

TEST_F(GeneratorTest, CallbackReturningFalseCancels) {
  Generator gen(*model_, *tok_, 256);
  int calls = 0;
  const auto r = gen.generate(prompt_, greedy(20), [&](std::string_view) { return ++calls < 3; });
  EXPECT_EQ(r.finish, FinishReason::Cancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_LT(r.tokens.size(), 20u);
}

TEST_F(GeneratorTest, GenerationStopsWhenTheContextIsFull) {
  Generator gen(*model_, *tok_, static_cast<int32_t>(prompt_.size()) + 3);
  const auto r = gen.generate(prompt_, greedy(100));
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_EQ(r.tokens.size(), 3u);
}

TEST_F(GeneratorTest, RejectsPromptsThatDoNotFitAndBadParameters) {
  Generator gen(*model_, *tok_, 8);
  std::vector<int32_t> long_prompt(8, prompt_.back());
  EXPECT_THROW(gen.generate(long_prompt, greedy(1)), Error);
  EXPECT_THROW(gen.generate({}, greedy(1)), Error);
  auto bad = greedy(1);
  bad.top_p = 2.0f;
  EXPECT_THROW(gen.generate(prompt_, bad), Error);
}

}  // namespace
}  // namespace tokamak
