// The workloads of `tokamak bench serve`: exact prompt lengths, length ranges, the
// prefix-shared groups, JSONL files and Poisson arrivals.

#include "cli/bench_serve_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "../engine/engine_test_util.h"
#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tokamak::cli {
namespace {

class BenchServeDatasetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()).release(); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  const Tokenizer& tok() const { return *model_->tok; }
  int32_t server_count(const std::string& text) const {  // as /v1/completions counts a prompt
    return static_cast<int32_t>(tok().encode(text, true, true).size());
  }

  static test::TestModel* model_;
};
test::TestModel* BenchServeDatasetTest::model_ = nullptr;

// A JSONL file removed at the end of the test.
struct TempJsonl {
  explicit TempJsonl(const std::string& text) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("tokamak_bench_serve_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
             ".jsonl"))
               .string();
    std::ofstream(path) << text;
  }
  ~TempJsonl() { std::filesystem::remove(path); }
  std::string path;
};

TEST(BenchServeLengthTest, DrawsStayInTheRange) {
  Rng rng(1);
  std::set<int32_t> seen;
  for (int i = 0; i < 5000; ++i) {
    const int32_t n = draw_length(100, 0.25, rng);
    ASSERT_GE(n, 75);
    ASSERT_LE(n, 125);
    seen.insert(n);
  }
  EXPECT_EQ(seen.size(), 51u);  // every value of [75, 125] comes up
  EXPECT_EQ(draw_length(100, 0.0, rng), 100);
  for (int i = 0; i < 100; ++i) EXPECT_GE(draw_length(1, 0.9, rng), 1);
}

TEST_F(BenchServeDatasetTest, RandomTextHasTheExactTokenCount) {
  const auto vocabulary = text_vocabulary(tok());
  Rng rng(3);
  for (int32_t n : {1, 2, 7, 64, 300}) {
    for (int k = 0; k < 5; ++k) {
      const std::string text = random_text(tok(), vocabulary, n, rng);
      EXPECT_TRUE(utf8::is_valid(text));
      EXPECT_EQ(tok().encode(text, false, true).size(), static_cast<size_t>(n)) << text;
    }
  }
}

TEST(BenchServeDatasetRealTest, RandomTextIsExactOnTheDefaultModel) {
  auto m = test::load_default_model(1, 64);
  if (!m) GTEST_SKIP() << "the default model is not in models/";
  const auto vocabulary = text_vocabulary(*m->tok);
  Rng rng(5);
  int exact = 0;
  for (int k = 0; k < 20; ++k) {
    const std::string text = random_text(*m->tok, vocabulary, 128, rng);
    EXPECT_TRUE(utf8::is_valid(text));
    exact += m->tok->encode(text, false, true).size() == 128;
  }
  EXPECT_EQ(exact, 20);
}

TEST_F(BenchServeDatasetTest, RandomDatasetIsSeededAndExact) {
  DatasetSpec spec;
  spec.num_prompts = 12;
  spec.input_len = 40;
  spec.output_len = 9;
  spec.seed = 11;
  const auto a = make_dataset(spec, tok());
  ASSERT_EQ(a.size(), 12u);
  for (const BenchPrompt& p : a) {
    EXPECT_EQ(p.prompt_tokens, 40);  // BOS included: the synthetic model adds one
    EXPECT_EQ(server_count(p.text), 40);
    EXPECT_EQ(p.output_len, 9);
    ASSERT_EQ(p.messages.size(), 1u);
    EXPECT_EQ(p.messages[0]["role"], "user");
    EXPECT_EQ(p.messages[0]["content"], p.text);
  }
  EXPECT_NE(a[0].text, a[1].text);
  const auto b = make_dataset(spec, tok());
  EXPECT_EQ(a[5].text, b[5].text);
  spec.seed = 12;
  EXPECT_NE(make_dataset(spec, tok())[5].text, a[5].text);
}

TEST_F(BenchServeDatasetTest, RangeRatioSpreadsBothLengths) {
  DatasetSpec spec;
  spec.num_prompts = 60;
  spec.input_len = 40;
  spec.output_len = 20;
  spec.range_ratio = 0.5;
  std::set<int32_t> inputs, outputs;
  for (const BenchPrompt& p : make_dataset(spec, tok())) {
    EXPECT_GE(p.prompt_tokens, 20);
    EXPECT_LE(p.prompt_tokens, 60);
    EXPECT_GE(p.output_len, 10);
    EXPECT_LE(p.output_len, 30);
    inputs.insert(p.prompt_tokens);
    outputs.insert(p.output_len);
  }
  EXPECT_GT(inputs.size(), 10u);
  EXPECT_GT(outputs.size(), 5u);
}

TEST_F(BenchServeDatasetTest, PrefixSharedGroupsInterleave) {
  DatasetSpec spec;
  spec.kind = DatasetKind::PrefixShared;
  spec.num_prompts = 9;
  spec.prefix_groups = 3;
  spec.prefix_len = 50;
  spec.input_len = 8;
  const auto prompts = make_dataset(spec, tok());
  ASSERT_EQ(prompts.size(), 9u);
  std::set<std::string> prefixes, questions;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& m = prompts[i].messages;
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0]["role"], "system");
    const std::string prefix = m[0]["content"];
    const std::string question = m[1]["content"];
    EXPECT_EQ(tok().encode(prefix, false, true).size(), 50u);
    EXPECT_EQ(tok().encode(question, false, true).size(), 8u);
    EXPECT_EQ(prompts[i].text, prefix + "\n" + question);
    EXPECT_EQ(prefix, prompts[i % 3].messages[0]["content"]) << i;  // group i % 3
    prefixes.insert(prefix);
    questions.insert(question);
  }
  EXPECT_EQ(prefixes.size(), 3u);
  EXPECT_EQ(questions.size(), 9u);
}

TEST_F(BenchServeDatasetTest, FileLinesGivePromptsMessagesAndLengths) {
  TempJsonl file(
      "{\"prompt\": \"hello there\"}\n"
      "\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, "
      "{\"role\": \"user\", \"content\": \"hi\"}], \"output_len\": 7}\n");
  DatasetSpec spec;
  spec.kind = DatasetKind::File;
  spec.path = file.path;
  spec.output_len = 5;
  auto prompts = make_dataset(spec, tok());
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].text, "hello there");
  EXPECT_EQ(prompts[0].output_len, 5);
  EXPECT_EQ(prompts[0].prompt_tokens, server_count("hello there"));
  EXPECT_TRUE(prompts[1].text.empty());
  EXPECT_EQ(prompts[1].messages.size(), 2u);
  EXPECT_EQ(prompts[1].output_len, 7);
  spec.num_prompts = 5;  // the lines again, in order
  prompts = make_dataset(spec, tok());
  ASSERT_EQ(prompts.size(), 5u);
  EXPECT_EQ(prompts[4].text, "hello there");
}

TEST_F(BenchServeDatasetTest, BadFilesNameTheLine) {
  const auto error_of = [&](const std::string& text) {
    TempJsonl file(text);
    DatasetSpec spec;
    spec.kind = DatasetKind::File;
    spec.path = file.path;
    try {
      make_dataset(spec, tok());
    } catch (const Error& e) {
      return std::string(e.what()).substr(file.path.size());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("{\"prompt\": \"a\"}\nnot json\n"), ":2: not valid JSON");
  EXPECT_EQ(error_of("{\"text\": \"a\"}\n"), ":1: expected a \"prompt\" or \"messages\" field");
  EXPECT_EQ(error_of("{\"prompt\": \"a\", \"output_len\": 0}\n"),
            ":1: \"output_len\" must be a positive integer");
  EXPECT_EQ(error_of("{\"messages\": [{\"role\": \"user\"}]}\n"),
            ":1: every message needs a string \"role\" and \"content\"");
  EXPECT_EQ(error_of("\n\n"), ": no prompts (expected one JSON object per line)");
  DatasetSpec missing;
  missing.kind = DatasetKind::File;
  missing.path = "/nonexistent/x.jsonl";
  EXPECT_THROW(make_dataset(missing, tok()), Error);
}

TEST_F(BenchServeDatasetTest, SettingsOutOfRangeAreRejected) {
  DatasetSpec spec;
  spec.range_ratio = 1.0;
  EXPECT_THROW(make_dataset(spec, tok()), Error);
  spec.range_ratio = 0;
  spec.num_prompts = 0;
  EXPECT_THROW(make_dataset(spec, tok()), Error);
}

TEST(BenchServeArrivalTest, PoissonGapsHaveTheRateAsMean) {
  const size_t n = 20000;
  const auto times = arrival_times(n, 8.0, 42);
  ASSERT_EQ(times.size(), n);
  EXPECT_EQ(times[0], 0.0);
  double sum_sq = 0;
  for (size_t i = 1; i < n; ++i) {
    ASSERT_GE(times[i], times[i - 1]);
    const double gap = times[i] - times[i - 1];
    sum_sq += (gap - 0.125) * (gap - 0.125);
  }
  const double mean = times.back() / static_cast<double>(n - 1);
  EXPECT_NEAR(mean, 0.125, 0.125 * 0.03);  // ~4 standard errors
  // Exponential: the standard deviation equals the mean.
  EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(n - 2)), 0.125, 0.125 * 0.05);
  EXPECT_EQ(arrival_times(n, 8.0, 42), times);
  EXPECT_NE(arrival_times(n, 8.0, 43), times);
}

TEST(BenchServeArrivalTest, InfiniteRateSendsEverythingAtOnce) {
  EXPECT_EQ(arrival_times(4, std::nullopt, 1), (std::vector<double>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace tokamak::cli
