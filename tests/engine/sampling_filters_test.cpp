#include "engine/sampling_filters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "engine/fast_exp.h"
#include "engine/rng.h"

namespace tokamak {
namespace {

// The first index of the largest logit, one compare at a time: greedy_token's definition.
int32_t first_max_index(const std::vector<float>& x) {
  int32_t token = 0;
  float best = x[0];
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > best) {
      best = x[i];
      token = static_cast<int32_t>(i);
    }
  }
  return token;
}

// Every length around the vector widths, ties among few distinct values (the lowest index
// must win), infinities and zeros of both signs, the max at either end; a NaN at index 0
// gives 0 and one elsewhere is passed over, as the one-compare loop does.
TEST(GreedyTokenTest, IsTheFirstIndexOfTheMax) {
  Rng rng(41);
  const float few[] = {-INFINITY, -2.0f, -0.0f, 0.0f, 1.5f, 3.0f, INFINITY};
  for (size_t n :
       {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{15}, size_t{16}, size_t{17},
        size_t{18}, size_t{31}, size_t{33}, size_t{64}, size_t{65}, size_t{100}, size_t{49152}}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) {
        v = trial % 2 == 0 ? few[rng.next() % std::size(few)]
                           : static_cast<float>(rng.uniform() * 200.0 - 100.0);
      }
      if (trial % 5 == 1) x.front() = 1000.0f;
      if (trial % 5 == 2) x.back() = 1000.0f;
      if (trial % 7 == 3) x[rng.next() % n] = NAN;
      if (trial % 11 == 4) x[0] = NAN;
      ASSERT_EQ(greedy_token(x), first_max_index(x)) << "n " << n << " trial " << trial;
    }
  }
}

std::vector<Candidate> from_values(const std::vector<float>& values) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < values.size(); ++i) c.push_back({values[i], static_cast<int32_t>(i)});
  return c;
}

std::set<int32_t> tokens(std::span<const Candidate> c) {
  std::set<int32_t> out;
  for (const Candidate& x : c) out.insert(x.token);
  return out;
}

// Random values in [0, scale); with `levels`, rounded to that many distinct values (ties).
std::vector<float> random_values(size_t n, uint64_t seed, double scale, int levels = 0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    double u = rng.uniform();
    if (levels > 0) u = std::floor(u * levels) / levels;
    x = static_cast<float>(u * scale);
  }
  return v;
}

TEST(FastExpTest, MatchesStdExpWithinTolerance) {
  double worst = 0.0;
  for (double x = -87.0; x <= 0.0; x += 0.000731) {
    const double got = exp_nonpositive(static_cast<float>(x));
    const double want = std::exp(static_cast<double>(static_cast<float>(x)));
    worst = std::max(worst, std::abs(got / want - 1.0));
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
}

TEST(FastExpTest, UnderflowAndMinusInfinityGiveZero) {
  EXPECT_GT(exp_nonpositive(-87.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-87.01f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1000.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-INFINITY), 0.0f);
}

TEST(SamplingFiltersTest, TopKKeepsTheLargestSortedWithTiesToLowerIds) {
  std::vector<Candidate> out(6);
  ASSERT_EQ(top_k_candidates(std::vector<float>{1, 5, 3, 5, -2, 4}, 3, out), 3u);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 3);
  EXPECT_EQ(out[2].token, 5);
  EXPECT_EQ(out[2].value, 4.0f);
  // The tie at the boundary goes to the lower id.
  ASSERT_EQ(top_k_candidates(std::vector<float>{2, 7, 2, 2}, 2, out), 2u);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 0);
  // k beyond the size keeps everything.
  EXPECT_EQ(top_k_candidates(std::vector<float>{1, 2}, 10, out), 2u);
  EXPECT_EQ(out[0].token, 1);
}

TEST(SamplingFiltersTest, TopKMatchesAFullSortOnBothPaths) {
  // k * 16 <= n takes the heap, larger k nth_element; ties are frequent with 50 levels.
  for (const int levels : {0, 50}) {
    const auto logits = random_values(3000, 11 + static_cast<uint64_t>(levels), 8.0, levels);
    auto reference = from_values(logits);
    std::sort(reference.begin(), reference.end(), more_likely);
    for (const size_t k : {1u, 7u, 64u, 187u, 188u, 500u, 2999u, 3000u}) {
      std::vector<Candidate> out(logits.size());
      ASSERT_EQ(top_k_candidates(logits, k, out), k);
      for (size_t i = 0; i < k; ++i) {
        ASSERT_EQ(out[i].token, reference[i].token) << "k " << k << " levels " << levels;
      }
    }
  }
}

TEST(SamplingFiltersTest, WeightsAreRelativeToTheMax) {
  auto c = from_values({std::log(0.2f), std::log(0.4f), -INFINITY, std::log(0.1f)});
  const double mass = weigh_candidates(c, 1.0f);
  EXPECT_EQ(c[1].value, 1.0f);
  EXPECT_NEAR(c[0].value, 0.5f, 1e-6f);
  EXPECT_EQ(c[2].value, 0.0f);
  EXPECT_NEAR(c[3].value, 0.25f, 1e-6f);
  EXPECT_NEAR(mass, 1.75, 1e-6);
  // Temperature 0.5 squares the ratios; the vocabulary form agrees.
  const std::vector<float> logits = {std::log(0.2f), std::log(0.4f), 3.0f - 1000.0f};
  std::vector<float> w(3);
  EXPECT_NEAR(weigh_logits(logits, 0.5f, w), 1.25, 1e-6);
  EXPECT_NEAR(w[0], 0.25f, 1e-6f);
  EXPECT_EQ(w[1], 1.0f);
  EXPECT_EQ(w[2], 0.0f);
}

TEST(SamplingFiltersTest, WeighLogitsSumsLongVocabularies) {
  const auto logits = random_values(1003, 5, 4.0);  // not a multiple of 8 lanes
  std::vector<float> w(logits.size());
  const double mass = weigh_logits(logits, 0.7f, w);
  const float max = *std::max_element(logits.begin(), logits.end());
  double want = 0.0;
  for (const float l : logits) want += std::exp((static_cast<double>(l) - max) / 0.7);
  EXPECT_NEAR(mass, want, want * 1e-6);
}

TEST(SamplingFiltersTest, TopPKeepsTheSmallestSetReachingTheMass) {
  // Probabilities 0.1, 0.2, 0.3, 0.4 (weights need no normalisation).
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
  const auto run = [&](float top_p) {
    auto c = from_values(probs);
    const Kept kept = top_p_filter(c, false, top_p, 1.0);
    return std::vector<Candidate>(c.begin(), c.begin() + static_cast<long>(kept.count));
  };
  auto kept = run(0.35f);  // 0.4 already reaches it
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].token, 3);
  kept = run(0.69f);  // 0.4 + 0.3
  EXPECT_EQ(tokens(kept), (std::set<int32_t>{2, 3}));
  kept = run(0.75f);  // 0.4 + 0.3 + 0.2
  EXPECT_EQ(tokens(kept), (std::set<int32_t>{1, 2, 3}));
  EXPECT_EQ(run(1.0f).size(), 4u);
  auto c = from_values(probs);
  EXPECT_NEAR(top_p_filter(c, false, 0.69f, 1.0).mass, 0.7, 1e-6);
  // Already sorted input is walked as it is.
  c = from_values({0.4f, 0.3f, 0.2f, 0.1f});
  const Kept sorted = top_p_filter(c, true, 0.69f, 1.0);
  EXPECT_EQ(sorted.count, 2u);
  EXPECT_EQ(c[1].token, 1);
}

// Checks that c[0, kept.count) is the top-`count` set of `weights` and that `count` is where
// the sorted prefix mass reaches top_p * total (up to rounding).
void expect_top_p(const std::vector<float>& weights, std::span<const Candidate> c, Kept kept,
                  float top_p) {
  auto reference = from_values(weights);
  std::sort(reference.begin(), reference.end(), more_likely);
  double total = 0.0;
  for (const float w : weights) total += w;
  const double target = static_cast<double>(top_p) * total;
  ASSERT_GE(kept.count, 1u);
  ASSERT_LE(kept.count, weights.size());
  EXPECT_EQ(tokens(c.first(kept.count)),
            tokens(std::span<const Candidate>(reference).first(kept.count)));
  double before = 0.0;
  for (size_t i = 0; i + 1 < kept.count; ++i) before += reference[i].value;
  const double at = before + reference[kept.count - 1].value;
  EXPECT_LT(before, target * (1 + 1e-9)) << "top_p " << top_p;
  if (kept.count < weights.size()) {
    EXPECT_GE(at, target * (1 - 1e-9)) << "top_p " << top_p;
  }
  double mass = 0.0;
  for (size_t i = 0; i < kept.count; ++i) mass += c[i].value;
  EXPECT_EQ(kept.mass, mass);
}

TEST(SamplingFiltersTest, TopPSelectionMatchesAFullSort) {
  // Flat and peaked weights, with and without ties, so the selection runs many rounds.
  for (const int levels : {0, 20}) {
    for (const double power : {1.0, 8.0}) {
      auto weights = random_values(5000, 7 + static_cast<uint64_t>(levels), 1.0, levels);
      for (float& w : weights) w = static_cast<float>(std::pow(w, power));
      double total = 0.0;
      for (const float w : weights) total += w;
      for (const float top_p : {0.001f, 0.3f, 0.9f, 0.999f, 1.0f}) {
        auto c = from_values(weights);
        const Kept kept = top_p_filter(c, false, top_p, total);
        expect_top_p(weights, c, kept, top_p);
      }
    }
  }
}

TEST(SamplingFiltersTest, TopPHandlesSortedAndEqualInputs) {
  for (const int shape : {0, 1, 2}) {
    std::vector<float> weights(3000);
    for (size_t i = 0; i < weights.size(); ++i) {
      weights[i] = shape == 0   ? 1.0f                                     // all equal
                   : shape == 1 ? static_cast<float>(i + 1)                // ascending
                                : static_cast<float>(weights.size() - i);  // descending
    }
    double total = 0.0;
    for (const float w : weights) total += w;
    for (const float top_p : {0.1f, 0.5f, 0.95f}) {
      auto c = from_values(weights);
      const Kept kept = top_p_filter(c, false, top_p, total);
      expect_top_p(weights, c, kept, top_p);
      if (shape == 0) {  // equal weights: the lowest ids win
        EXPECT_EQ(*tokens(std::span(c).first(kept.count)).rbegin(),
                  static_cast<int32_t>(kept.count) - 1);
      }
    }
  }
}

TEST(SamplingFiltersTest, TopPOverAGatheredSubsetEqualsTopPOverAll) {
  // Peaked like real logits: most tokens fall under the negligible weight and are skipped.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const auto logits = random_values(20000, seed, 30.0);
    std::vector<float> weights(logits.size());
    const double mass = weigh_logits(logits, 1.0f, weights);
    for (const float top_p : {0.5f, 0.9f, 0.99f}) {
      std::vector<Candidate> all = from_values(weights);
      const Kept full = top_p_filter(all, false, top_p, mass);
      std::vector<Candidate> some(weights.size());
      const size_t gathered =
          gather_candidates(weights, top_p_negligible_weight(top_p, mass, weights.size()), some);
      EXPECT_LT(gathered, weights.size());
      const Kept part = top_p_filter(std::span(some).first(gathered), false, top_p, mass);
      EXPECT_EQ(tokens(std::span(some).first(part.count)),
                tokens(std::span(all).first(full.count)));
    }
  }
}

TEST(SamplingFiltersTest, TopPKeepsAllOfAShortSubset) {
  auto c = from_values({0.3f, 0.2f});
  const Kept kept = top_p_filter(c, false, 0.9f, 1.0);  // the rest of the mass is elsewhere
  EXPECT_EQ(kept.count, 2u);
  EXPECT_NEAR(kept.mass, 0.5, 1e-7);
}

TEST(SamplingFiltersTest, GatherKeepsTokenOrder) {
  std::vector<Candidate> out(5);
  const size_t n = gather_candidates(std::vector<float>{0.5f, 0.01f, 1.0f, 0.2f, 0.0f}, 0.2f, out);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(out[0].token, 0);
  EXPECT_EQ(out[1].token, 2);
  EXPECT_EQ(out[2].token, 3);
  EXPECT_FLOAT_EQ(top_p_negligible_weight(0.9f, 2.0, 100), 0.001f);
}

TEST(SamplingFiltersTest, MinPIsRelativeToTheLargestWeight) {
  // Probabilities 0.5, 0.3, 0.15, 0.05; min_p 0.2 -> threshold 0.1.
  auto c = from_values({0.05f, 0.5f, 0.15f, 0.3f});
  Kept kept = min_p_filter(c, 0.2f);
  ASSERT_EQ(kept.count, 3u);
  EXPECT_EQ(c[0].token, 1);  // order kept
  EXPECT_EQ(c[1].token, 2);
  EXPECT_EQ(c[2].token, 3);
  EXPECT_NEAR(kept.mass, 0.95, 1e-6);
  // Scale does not matter: weights x10 give the same set. min_p 0.5 -> threshold 0.25.
  c = from_values({0.5f, 5.0f, 1.5f, 3.0f});
  kept = min_p_filter(c, 0.5f);
  EXPECT_EQ(tokens(std::span(c).first(kept.count)), (std::set<int32_t>{1, 3}));
  // min_p 1 keeps only the max (and its ties); min_p 0 keeps all.
  c = from_values({1.0f, 0.2f, 1.0f});
  EXPECT_EQ(min_p_filter(c, 1.0f).count, 2u);
  c = from_values({1.0f, 0.0f, 1.0f});
  EXPECT_EQ(min_p_filter(c, 0.0f).count, 3u);
}

TEST(SamplingFiltersTest, MinPWeightsZeroTheUnlikely) {
  // Weights relative to a max of 1: probabilities 0.5, 0.3, 0.15, 0.05 scaled by 2.
  std::vector<float> w = {0.1f, 1.0f, 0.3f, 0.6f, 0.0f};
  EXPECT_NEAR(min_p_weights(w, 0.2f), 1.9, 1e-6);
  EXPECT_EQ(w, (std::vector<float>{0.0f, 1.0f, 0.3f, 0.6f, 0.0f}));
  EXPECT_NEAR(min_p_weights(w, 0.0f), 1.9, 1e-6);
  EXPECT_NEAR(min_p_weights(w, 1.0f), 1.0, 1e-6);
}

TEST(SamplingFiltersTest, LogSumExpMatchesDouble) {
  const auto logits = random_values(777, 3, 40.0);
  double max = -INFINITY;
  for (const float l : logits) max = std::max(max, static_cast<double>(l));
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(l - max);
  EXPECT_NEAR(log_sum_exp(logits), max + std::log(sum), 1e-6);
  EXPECT_NEAR(log_sum_exp(std::vector<float>{0.0f, -INFINITY, 0.0f}), std::log(2.0), 1e-7);
}

TEST(SamplingFiltersTest, PickWalksTheCumulativeWeights) {
  const auto c = from_values({1.0f, 0.0f, 3.0f});  // mass 4: [0, 1) -> 0, [1, 4) -> 2
  EXPECT_EQ(pick(c, 4.0, 0.0), 0);
  EXPECT_EQ(pick(c, 4.0, 0.2499), 0);
  EXPECT_EQ(pick(c, 4.0, 0.25), 2);
  EXPECT_EQ(pick(c, 4.0, 0.9999), 2);
  const std::vector<float> w = {1.0f, 0.0f, 3.0f};
  EXPECT_EQ(pick(w, 4.0, 0.2499), 0);
  EXPECT_EQ(pick(w, 4.0, 0.25), 2);
  // Rounding that leaves u * mass past the end falls back to the last token with weight.
  EXPECT_EQ(pick(from_values({1.0f, 1.0f, 0.0f}), 2.5, 0.99), 1);
  EXPECT_EQ(pick(std::vector<float>{1.0f, 1.0f, 0.0f}, 2.5, 0.99), 1);
}

}  // namespace
}  // namespace tokamak
