#include "server/metrics_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tokamak::server {
namespace {

std::vector<uint64_t> counts(const Histogram& h) {
  return {h.bucket_counts().begin(), h.bucket_counts().end()};
}

TEST(MetricsHistogramTest, ValueLandsInFirstBucketWhoseBoundIsAtLeastIt) {
  Histogram h({0.1, 1, 10});
  h.observe(0.05);  // le 0.1
  h.observe(0.1);   // le 0.1: bounds are inclusive
  h.observe(0.5);   // le 1
  h.observe(10);    // le 10
  h.observe(11);    // +Inf
  h.observe(-3);    // le 0.1 (the first bucket takes everything below)
  EXPECT_EQ(counts(h), (std::vector<uint64_t>{3, 1, 1, 1}));
  EXPECT_EQ(h.count(), 6u);
  EXPECT_DOUBLE_EQ(h.sum(), 0.05 + 0.1 + 0.5 + 10 + 11 - 3);
}

TEST(MetricsHistogramTest, EmptyHistogramHasZeroCountsAndAnInfBucket) {
  Histogram h({1, 2});
  EXPECT_EQ(counts(h), (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.sum(), 0.0);
}

TEST(MetricsHistogramTest, BucketListsAreVllmsAndStrictlyIncreasing) {
  const std::vector<std::vector<double>> lists = {ttft_buckets(), token_gap_buckets(),
                                                  request_time_buckets(), iteration_token_buckets(),
                                                  one_two_five_buckets(1e6)};
  for (const auto& b : lists) {
    ASSERT_FALSE(b.empty());
    EXPECT_EQ(std::adjacent_find(b.begin(), b.end(), std::greater_equal<>()), b.end());
  }
  EXPECT_EQ(ttft_buckets().size(), 22u);
  EXPECT_EQ(ttft_buckets().front(), 0.001);
  EXPECT_EQ(ttft_buckets().back(), 2560.0);
  EXPECT_EQ(token_gap_buckets().front(), 0.01);
  EXPECT_EQ(token_gap_buckets().back(), 80.0);
  EXPECT_EQ(request_time_buckets().front(), 0.3);
  EXPECT_EQ(request_time_buckets().back(), 7680.0);
  EXPECT_EQ(iteration_token_buckets().back(), 16384.0);
}

TEST(MetricsHistogramTest, OneTwoFiveBucketsStopAtTheMaximum) {
  EXPECT_EQ(one_two_five_buckets(1000),
            (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(one_two_five_buckets(999), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
  EXPECT_EQ(one_two_five_buckets(1), (std::vector<double>{1}));
  EXPECT_EQ(one_two_five_buckets(1e6).back(), 1e6);
}

}  // namespace
}  // namespace tokamak::server
