#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "core/error.h"
#include "engine/rng.h"

namespace tokamak {
namespace {

SamplingParams with_seed(uint64_t seed) {
  SamplingParams params;
  params.seed = seed;
  return params;
}

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (const double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double max = logits[0];
  for (const float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<double> p;
  double sum = 0.0;
  for (const float l : logits) {
    p.push_back(std::exp((l - max) / temperature));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  return p;
}

std::vector<float> random_logits(size_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> logits(n);
  for (float& l : logits) l = static_cast<float>((rng.uniform() - 0.5) * scale);
  return logits;
}

// Samples `draws` times from fresh copies of `logits` (no accept(): the distribution stays put).
std::vector<int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  SamplerWorkspace workspace;
  std::vector<int> counts(logits.size(), 0);
  std::vector<float> row;
  for (int i = 0; i < draws; ++i) {
    row = logits;
    ++counts[static_cast<size_t>(sampler.sample(row, workspace))];
  }
  return counts;
}

// Pearson's statistic over the cells with expected > 0; a draw in a cell of probability 0
// makes it infinite.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
  double stat = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * draws;
    if (expected == 0.0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

// Far beyond the 1 - 1e-6 quantile of chi-square with `dof` degrees of freedom (for dof 9 that
// quantile is ~ 43; the bound is 9 + 10 * sqrt(18) ~ 51); a fixed seed makes the test
// repeatable, the negative controls below show it can fail.
double chi_square_bound(size_t dof) {
  return static_cast<double>(dof) + 10.0 * std::sqrt(2.0 * static_cast<double>(dof));
}

TEST(RngTest, SplitMix64MatchesTheReferenceSequence) {
  // First outputs of the reference splitmix64.c for seed 1234567.
  uint64_t state = 1234567;
  EXPECT_EQ(splitmix64(state), 6457827717110365317ULL);
  EXPECT_EQ(splitmix64(state), 3203168211198807973ULL);
}

TEST(RngTest, UniformIsInRangeAndCentred) {
  Rng rng(42);
  double sum = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(RngTest, SameSeedSameStream) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToTheLowestId) {
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler(params, 5);
  SamplerWorkspace workspace;
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, -1.0f, 0.0f};
  EXPECT_EQ(sampler.sample(logits, workspace), 1);
  logits = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits, workspace), 1);
  logits = {4.0f, 4.0f, -INFINITY, 4.0f, 1.0f};
  EXPECT_EQ(sampler.sample(logits, workspace), 0);
  logits = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -5.0f};
  EXPECT_EQ(sampler.sample(logits, workspace), 4);
  // A temperature below the epsilon is greedy too.
  params.temperature = 1e-7f;
  Sampler tiny(params, 5);
  logits = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  EXPECT_EQ(tiny.sample(logits, workspace), 1);
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  SamplerWorkspace workspace;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingParams params = with_seed(seed);
    params.top_k = 1;
    params.temperature = 1.5f;
    Sampler top1(params, 1000);
    Sampler argmax(greedy, 1000);
    auto logits = random_logits(1000, seed, 4.0);
    logits[seed * 13 % 1000] = 10.0f;  // a tie at the top, which the lower id wins
    logits[seed * 7 % 1000] = 10.0f;
    auto copy = logits;
    EXPECT_EQ(top1.sample(logits, workspace), argmax.sample(copy, workspace));
  }
}

TEST(SamplerTest, TopKDrawsOnlyTheTopKInProportion) {
  SamplingParams params = with_seed(1);
  params.top_k = 2;
  Sampler sampler(params, 4);
  const auto logits = log_of({0.1, 0.2, 0.3, 0.4});
  const int draws = 20000;
  const auto counts = histogram(sampler, logits, draws);
  EXPECT_LT(chi_square(counts, {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0}, draws), chi_square_bound(1));
}

TEST(SamplerTest, TopPDrawsOnlyTheNucleusInProportion) {
  SamplingParams params = with_seed(2);
  params.top_p = 0.69f;  // 0.4 + 0.3 >= 0.69
  Sampler sampler(params, 4);
  const int draws = 20000;
  const auto counts = histogram(sampler, log_of({0.1, 0.2, 0.3, 0.4}), draws);
  EXPECT_LT(chi_square(counts, {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0}, draws), chi_square_bound(1));
}

TEST(SamplerTest, MinPDrawsOnlyLikelyTokensInProportion) {
  SamplingParams params = with_seed(3);
  params.min_p = 0.2f;  // keeps probabilities >= 0.2 * 0.5 = 0.1
  Sampler sampler(params, 4);
  const int draws = 20000;
  const auto counts = histogram(sampler, log_of({0.5, 0.3, 0.15, 0.05}), draws);
  EXPECT_LT(chi_square(counts, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0}, draws),
            chi_square_bound(2));
}

TEST(SamplerTest, FiltersCombineInOrder) {
  // top_k 3 keeps {0.4, 0.3, 0.2} (renormalised 4/9, 3/9, 2/9); top_p 0.75 keeps 4/9 + 3/9;
  // min_p 0.8 then drops 3/9 < 0.8 * 4/9: only the most likely token remains.
  SamplingParams params = with_seed(4);
  params.top_k = 3;
  params.top_p = 0.75f;
  Sampler two(params, 4);
  const auto logits = log_of({0.1, 0.2, 0.3, 0.4});
  const int draws = 5000;
  EXPECT_LT(chi_square(histogram(two, logits, draws), {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0}, draws),
            chi_square_bound(1));
  params.min_p = 0.8f;
  Sampler one(params, 4);
  EXPECT_EQ(histogram(one, logits, draws)[3], draws);
}

TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {0.5f,  -1.0f, 2.0f,  0.0f, 1.0f,
                                     -3.0f, 1.5f,  -0.5f, 0.2f, -2.0f};
  const int draws = 100000;
  for (const float temperature : {1.0f, 0.5f, 2.0f}) {
    SamplingParams params = with_seed(12345);
    params.temperature = temperature;
    Sampler sampler(params, static_cast<int32_t>(logits.size()));
    const auto counts = histogram(sampler, logits, draws);
    const double stat = chi_square(counts, softmax(logits, temperature), draws);
    EXPECT_LT(stat, chi_square_bound(9)) << "temperature " << temperature;
    // Negative control: the same draws are far from a slightly different temperature.
    const double wrong = chi_square(counts, softmax(logits, temperature * 1.1), draws);
    EXPECT_GT(wrong, chi_square_bound(9)) << "temperature " << temperature;
  }
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const auto run = [](uint64_t seed) {
    SamplingParams params = with_seed(seed);
    params.top_p = 0.95f;
    params.frequency_penalty = 0.1f;
    Sampler sampler(params, 300, std::vector<int32_t>{1, 2, 3});
    SamplerWorkspace workspace;
    const auto logits = random_logits(300, 99, 6.0);
    std::vector<int32_t> tokens;
    std::vector<float> row;
    for (int i = 0; i < 1000; ++i) {
      row = logits;
      tokens.push_back(sampler.sample(row, workspace));
      sampler.accept(tokens.back());
    }
    return tokens;
  };
  const auto a = run(2024);
  EXPECT_EQ(a, run(2024));
  EXPECT_NE(a, run(2025));
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 10u);  // it really sampled
}

TEST(SamplerTest, NoSeedDrawsARandomOne) {
  SamplingParams params;
  Sampler a(params, 10), b(params, 10);
  EXPECT_NE(a.seed(), b.seed());  // a 2^-64 chance of a false failure
  params.seed = 77;
  EXPECT_EQ(Sampler(params, 10).seed(), 77u);
}

TEST(SamplerTest, RepetitionPenaltyCoversPromptAndOutput) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  Sampler sampler(params, 5, std::vector<int32_t>{0, 1, 1});
  SamplerWorkspace workspace;
  sampler.accept(2);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  sampler.sample(logits, workspace);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.25f, 3.0f, 0.0f}));
  // Applied once per token, however often it was seen.
  sampler.accept(2);
  logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  sampler.sample(logits, workspace);
  EXPECT_EQ(logits[2], 0.25f);
}

TEST(SamplerTest, PresenceAndFrequencyCoverOutputOnly) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  Sampler sampler(params, 4, std::vector<int32_t>{0, 0, 3});  // prompt: no effect here
  SamplerWorkspace workspace;
  sampler.accept(1);
  sampler.accept(2);
  sampler.accept(2);
  sampler.accept(2);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  sampler.sample(logits, workspace);
  // token 1: 1 - 0.25 * 1 - 0.5 = 0.25; token 2: 1 - 0.25 * 3 - 0.5 = -0.25.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.25f, -0.25f, 1.0f}));
  EXPECT_EQ(sampler.num_accepted(), 4);
}

TEST(SamplerTest, AllPenaltiesInVllmOrder) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  Sampler sampler(params, 4, std::vector<int32_t>{0, 1});
  SamplerWorkspace workspace;
  sampler.accept(2);
  sampler.accept(2);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f};
  EXPECT_EQ(sampler.sample(logits, workspace), 3);
  // token 2: 0.5 / 2 = 0.25, - 0.25 * 2 = -0.25, - 0.5 = -0.75.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, -0.75f, 3.0f}));
}

TEST(SamplerTest, NegativePenaltiesEncourage) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.presence_penalty = -2.0f;
  Sampler sampler(params, 3);
  SamplerWorkspace workspace;
  sampler.accept(2);
  std::vector<float> logits = {1.0f, 0.0f, -0.5f};
  EXPECT_EQ(sampler.sample(logits, workspace), 2);  // -0.5 + 2 = 1.5
  EXPECT_EQ(logits[2], 1.5f);
}

TEST(SamplerTest, LogprobsAreLogSoftmaxOfPenalisedLogits) {
  SamplingParams params = with_seed(5);
  params.logprobs = 2;
  params.temperature = 0.3f;  // does not change the reported log-probabilities
  params.top_k = 1;           // nor do the filters
  Sampler sampler(params, 4);
  SamplerWorkspace workspace;
  auto logits = log_of({0.1, 0.2, 0.3, 0.4});
  for (float& l : logits) l += 7.0f;  // a shift changes nothing
  SampleLogprobs out;
  EXPECT_EQ(sampler.sample(logits, workspace, &out), 3);
  EXPECT_EQ(out.sampled.token, 3);
  EXPECT_NEAR(out.sampled.logprob, std::log(0.4), 1e-5);
  ASSERT_EQ(out.top().size(), 2u);
  EXPECT_EQ(out.top()[0].token, 3);
  EXPECT_NEAR(out.top()[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(out.top()[1].token, 2);
  EXPECT_NEAR(out.top()[1].logprob, std::log(0.3), 1e-5);
}

TEST(SamplerTest, LogprobsSeePenaltiesAndBreakTiesToLowerIds) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.logprobs = 3;
  params.presence_penalty = 1.0f;
  Sampler sampler(params, 4);
  SamplerWorkspace workspace;
  sampler.accept(0);
  // After the penalty: {0, 0, 0, -inf}: three equal tokens.
  std::vector<float> logits = {1.0f, 0.0f, 0.0f, -INFINITY};
  SampleLogprobs out;
  EXPECT_EQ(sampler.sample(logits, workspace, &out), 0);
  ASSERT_EQ(out.num_top, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out.top()[static_cast<size_t>(i)].token, i);
    EXPECT_NEAR(out.top()[static_cast<size_t>(i)].logprob, std::log(1.0 / 3.0), 1e-6);
  }
  EXPECT_NEAR(out.sampled.logprob, std::log(1.0 / 3.0), 1e-6);
}

TEST(SamplerTest, LogprobsCountIsClampedToTheVocabAndZeroMeansSampledOnly) {
  SamplingParams params = with_seed(6);
  params.logprobs = 20;
  Sampler small(params, 3);
  SamplerWorkspace workspace;
  std::vector<float> logits = {0.0f, -INFINITY, 1.0f};
  SampleLogprobs out;
  const int32_t token = small.sample(logits, workspace, &out);
  EXPECT_EQ(out.num_top, 3);
  EXPECT_EQ(out.top()[2].token, 1);
  EXPECT_EQ(out.top()[2].logprob, -INFINITY);
  EXPECT_EQ(out.sampled.token, token);

  params.logprobs = 0;
  Sampler none(params, 3);
  logits = {0.0f, 0.0f, 0.0f};
  none.sample(logits, workspace, &out);
  EXPECT_EQ(out.num_top, 0);
  EXPECT_NEAR(out.sampled.logprob, std::log(1.0 / 3.0), 1e-6);
}

TEST(SamplerTest, RejectsInvalidInputsAtConstruction) {
  SamplingParams params;
  params.top_p = 0.0f;
  EXPECT_THROW(Sampler(params, 10), Error);
  try {
    Sampler sampler(params, 10);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "top_p must be in (0, 1], got 0");
  }
  EXPECT_THROW(Sampler(SamplingParams{}, 0), Error);
  EXPECT_THROW(Sampler(SamplingParams{}, 10, std::vector<int32_t>{3, 10}), Error);
  EXPECT_THROW(Sampler(SamplingParams{}, 10, std::vector<int32_t>{-1}), Error);
  params = SamplingParams{};
  params.stop_token_ids = {10};
  EXPECT_THROW(Sampler(params, 10), Error);
}

TEST(SamplerTest, LargeVocabularyReusesTheWorkspace) {
  // A 151,936-token vocabulary (Qwen2's): every path, and no growth after the first call.
  const int32_t vocab = 151936;
  const auto logits = random_logits(static_cast<size_t>(vocab), 8, 20.0);
  SamplerWorkspace workspace;
  const Candidate* first = workspace.candidates(vocab).data();
  for (const float top_p : {1.0f, 0.9f, 0.5f}) {
    for (const int32_t top_k : {0, 40, 100000}) {
      SamplingParams params = with_seed(9);
      params.top_p = top_p;
      params.top_k = top_k;
      params.min_p = 0.01f;
      params.logprobs = 5;
      params.repetition_penalty = 1.1f;
      Sampler sampler(params, vocab, std::vector<int32_t>{5, 6, 7});
      SampleLogprobs out;
      std::vector<float> row;
      for (int i = 0; i < 3; ++i) {
        row = logits;
        const int32_t token = sampler.sample(row, workspace, &out);
        ASSERT_GE(token, 0);
        ASSERT_LT(token, vocab);
        EXPECT_EQ(out.sampled.token, token);
        sampler.accept(token);
      }
      EXPECT_EQ(workspace.candidates(vocab).data(), first);
    }
  }
}

// Pinned output: these sequences were produced by this implementation. Every build (-O2,
// -O3 with vectorised exp, sanitizers) and platform must reproduce them bit for bit; a change
// here means seeded requests no longer replay, which must be a deliberate decision.
std::vector<int32_t> pinned_run(int32_t top_k, float top_p, float min_p) {
  SamplingParams params = with_seed(42);
  params.temperature = 0.8f;
  params.top_k = top_k;
  params.top_p = top_p;
  params.min_p = min_p;
  params.repetition_penalty = 1.2f;
  Sampler sampler(params, 1000);
  SamplerWorkspace workspace;
  const auto logits = random_logits(1000, 4242, 12.0);
  std::vector<int32_t> tokens;
  std::vector<float> row;
  for (int i = 0; i < 16; ++i) {
    row = logits;
    tokens.push_back(sampler.sample(row, workspace));
    sampler.accept(tokens.back());
  }
  return tokens;
}

TEST(SamplerTest, SeededOutputIsPinned) {
  EXPECT_EQ(pinned_run(0, 1.0f, 0.0f),
            (std::vector<int32_t>{87, 321, 607, 897, 995, 720, 648, 797, 692, 510, 597, 250, 744,
                                  287, 641, 847}));
  EXPECT_EQ(pinned_run(50, 1.0f, 0.0f),
            (std::vector<int32_t>{409, 850, 720, 250, 399, 995, 763, 262, 519, 744, 51, 120, 535,
                                  66, 457, 643}));
  EXPECT_EQ(pinned_run(0, 0.9f, 0.0f),
            (std::vector<int32_t>{117, 408, 851, 386, 166, 326, 924, 53, 71, 680, 870, 305, 605,
                                  328, 969, 701}));
  EXPECT_EQ(pinned_run(0, 1.0f, 0.05f),
            (std::vector<int32_t>{91, 313, 606, 897, 995, 720, 644, 797, 680, 503, 581, 242, 749,
                                  276, 641, 849}));
}

}  // namespace
}  // namespace tokamak
