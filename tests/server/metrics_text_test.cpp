#include "server/metrics_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <locale>
#include <random>
#include <string>

namespace tokamak::server {
namespace {

TEST(MetricsTextTest, EscapesLabelValues) {
  EXPECT_EQ(escape_label_value("plain-name.Q4_1"), "plain-name.Q4_1");
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_label_value(""), "");
}

TEST(MetricsTextTest, EscapesHelpButNotQuotes) {
  EXPECT_EQ(escape_help("say \"hi\"\\now\nthen"), "say \"hi\"\\\\now\\nthen");
}

TEST(MetricsTextTest, FormatsValuesInTheirShortestRoundTripForm) {
  EXPECT_EQ(format_value(0.001), "0.001");
  EXPECT_EQ(format_value(1e-05), "1e-05");
  EXPECT_EQ(format_value(3.0), "3");
  EXPECT_EQ(format_value(0.0), "0");
  EXPECT_EQ(format_value(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-12, 12);
  for (int i = 0; i < 1000; ++i) {
    const double v = std::pow(10.0, exponent(rng));
    EXPECT_EQ(std::strtod(format_value(v).c_str(), nullptr), v);
  }
}

TEST(MetricsTextTest, FormatsBoundsAsPrometheusClientDoes) {
  EXPECT_EQ(format_bound(1.0), "1.0");
  EXPECT_EQ(format_bound(2560.0), "2560.0");
  EXPECT_EQ(format_bound(0.25), "0.25");
  EXPECT_EQ(format_bound(1e-05), "1e-05");
  EXPECT_EQ(format_bound(std::numeric_limits<double>::infinity()), "+Inf");
}

struct CommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST(MetricsTextTest, NumbersIgnoreTheGlobalLocale) {
  const std::locale previous =
      std::locale::global(std::locale(std::locale::classic(), new CommaDecimal));
  const std::string small = format_value(0.5);
  const std::string big = format_value(1234567.0);
  const std::string bound = format_bound(0.25);
  std::locale::global(previous);
  EXPECT_EQ(small, "0.5");
  EXPECT_EQ(big, "1234567");
  EXPECT_EQ(bound, "0.25");
}

TEST(MetricsTextTest, WritesSamplesWithConstantAndExtraLabels) {
  PrometheusWriter w({{"model_name", "m\"x"}});
  w.family("tokamak:request_success_total", "counter", "Count of requests.");
  w.sample("tokamak:request_success_total", uint64_t{3}, {{"finished_reason", "stop"}});
  w.family("tokamak:kv_cache_usage_perc", "gauge", "Usage.");
  w.sample("tokamak:kv_cache_usage_perc", 0.25);
  EXPECT_EQ(w.take(),
            "# HELP tokamak:request_success_total Count of requests.\n"
            "# TYPE tokamak:request_success_total counter\n"
            "tokamak:request_success_total{model_name=\"m\\\"x\",finished_reason=\"stop\"} 3\n"
            "# HELP tokamak:kv_cache_usage_perc Usage.\n"
            "# TYPE tokamak:kv_cache_usage_perc gauge\n"
            "tokamak:kv_cache_usage_perc{model_name=\"m\\\"x\"} 0.25\n");
}

TEST(MetricsTextTest, WritesNoBracesWithoutLabels) {
  PrometheusWriter w({});
  w.sample("up", 1.0);
  w.sample("x", uint64_t{2}, {{"a", "b"}});
  EXPECT_EQ(w.take(), "up 1\nx{a=\"b\"} 2\n");
}

TEST(MetricsTextTest, WritesAHistogramWithCumulativeBuckets) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 20.0}) h.observe(v);
  PrometheusWriter w({{"model_name", "m"}});
  w.histogram("tokamak:x_seconds", "Histogram of x.", h);
  EXPECT_EQ(w.take(),
            "# HELP tokamak:x_seconds Histogram of x.\n"
            "# TYPE tokamak:x_seconds histogram\n"
            "tokamak:x_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n"
            "tokamak:x_seconds_bucket{model_name=\"m\",le=\"1.0\"} 3\n"
            "tokamak:x_seconds_bucket{model_name=\"m\",le=\"10.0\"} 3\n"
            "tokamak:x_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
            "tokamak:x_seconds_sum{model_name=\"m\"} 20.65\n"
            "tokamak:x_seconds_count{model_name=\"m\"} 4\n");
}

}  // namespace
}  // namespace tokamak::server
