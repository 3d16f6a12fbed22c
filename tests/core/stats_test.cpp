#include "core/stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokamak {
namespace {

TEST(StatsTest, PercentileOfOneValueIsThatValue) {
  const std::vector<double> one = {7.5};
  for (double p : {0.0, 50.0, 99.0, 100.0}) EXPECT_DOUBLE_EQ(percentile_sorted(one, p), 7.5);
}

TEST(StatsTest, PercentileInterpolatesLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], p) for p = 0, 25, 50, 90, 99, 100.
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 100), 4.0);
}

TEST(StatsTest, PercentileSortsUnorderedValues) {
  EXPECT_DOUBLE_EQ(*percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(*percentile({10, 0}, 99), 9.9);
  EXPECT_FALSE(percentile({}, 50).has_value());
}

TEST(StatsTest, SummarizeGivesMeanExtremesAndPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // 1..100, reversed
  const auto s = summarize(v);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->count, 100u);
  EXPECT_DOUBLE_EQ(s->mean, 50.5);
  EXPECT_DOUBLE_EQ(s->min, 1.0);
  EXPECT_DOUBLE_EQ(s->max, 100.0);
  EXPECT_DOUBLE_EQ(s->p50, 50.5);
  EXPECT_DOUBLE_EQ(s->p90, 90.1);
  EXPECT_DOUBLE_EQ(s->p99, 99.01);
}

TEST(StatsTest, SummarizeOfNothingIsEmpty) {
  EXPECT_FALSE(summarize({}).has_value());
}

}  // namespace
}  // namespace tokamak
