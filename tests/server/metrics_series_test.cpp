#include "server/metrics_series.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "core/stats.h"
#include "server/metrics.h"

namespace tokamak::server {
namespace {

// Synthetic steady-clock times: whole seconds from a fixed origin, far from any real now.
const Clock::time_point kT0 = Clock::time_point(std::chrono::hours(1000));
const int64_t kSecond0 = 1000 * 3600;
Clock::time_point at(double seconds) {
  return kT0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

TEST(MetricsSeriesTest, PercentileUnsortedMatchesCoreStats) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 10);
  for (size_t n = 1; n <= 40; ++n) {
    std::vector<double> values(n);
    for (double& v : values) v = u(rng);
    for (double p : {0.0, 1.0, 50.0, 90.0, 99.0, 100.0}) {
      std::vector<double> scratch = values;
      EXPECT_DOUBLE_EQ(*percentile_unsorted(scratch, p), *percentile(values, p)) << n << " " << p;
    }
  }
  std::vector<double> none;
  EXPECT_FALSE(percentile_unsorted(none, 50).has_value());
}

TEST(MetricsSeriesTest, SecondsAreFlooredFromTheSteadyClock) {
  EXPECT_EQ(RecentSeries::second_of(at(0)), kSecond0);
  EXPECT_EQ(RecentSeries::second_of(at(0.999)), kSecond0);
  EXPECT_EQ(RecentSeries::second_of(at(1)), kSecond0 + 1);
  EXPECT_EQ(RecentSeries::second_of(at(-0.5)), kSecond0 - 1);
}

TEST(MetricsSeriesTest, RingKeepsTheNewestSeconds) {
  RecentSeries series(5);
  for (int s = 10; s <= 14; ++s) series.add_generation_tokens(at(s + 0.5), s);
  auto copy = series.copy(kSecond0 + 10, kSecond0 + 14);
  ASSERT_EQ(copy.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(copy[i].second, kSecond0 + 10 + i);
    EXPECT_EQ(copy[i].generation_tokens, 10 + i);
  }
  series.add_generation_tokens(at(15), 1);  // recycles second 10's slot
  series.add_generation_tokens(at(9), 1);   // too old: dropped
  series.add_generation_tokens(at(12), 1);  // still kept
  copy = series.copy(kSecond0 + 9, kSecond0 + 16);
  ASSERT_EQ(copy.size(), 8u);
  EXPECT_EQ(copy[0].generation_tokens, 0);   // 9
  EXPECT_EQ(copy[1].generation_tokens, 0);   // 10, gone
  EXPECT_EQ(copy[3].generation_tokens, 13);  // 12
  EXPECT_EQ(copy[6].generation_tokens, 1);   // 15
  EXPECT_EQ(copy[7].second, kSecond0 + 16);
  EXPECT_EQ(copy[7].generation_tokens, 0);
  EXPECT_TRUE(series.copy(kSecond0 + 3, kSecond0 + 2).empty());
}

TEST(MetricsSeriesTest, EachSecondKeepsABoundedSampleOfValues) {
  RecentSeries series(3);
  for (int i = 0; i < 1000; ++i) series.add_ttft(at(0.5), i);
  const auto copy = series.copy(kSecond0, kSecond0);
  ASSERT_EQ(copy[0].ttft.size(), RecentSeries::kMaxValuesPerSecond);
  double max_kept = 0;
  for (double v : copy[0].ttft) {
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 1000);
    max_kept = std::max(max_kept, v);
  }
  EXPECT_GT(max_kept, 500);  // a sample of all of them, not the first 128
}

// A Stop sample: arrival `start`, first token `ttft` later, one token every `gap` s after.
SampleMetrics sample(double start, double ttft, int tokens, double gap) {
  SampleMetrics s;
  s.output_tokens = tokens;
  s.arrival = at(start);
  s.first_scheduled = at(start);
  s.first_token = at(start + ttft);
  for (int i = 0; i < tokens; ++i) s.token_times.push_back(at(start + ttft + i * gap));
  s.finished = s.token_times.back();
  return s;
}

// Unix time 1764600000.5 when the steady clock reads at(100.5).
const auto kWallNow = std::chrono::system_clock::time_point(std::chrono::seconds(1764600000)) +
                      std::chrono::milliseconds(500);

TEST(ServerMetricsDashboardTest, SeriesAndWindowFromSyntheticTimes) {
  ServerMetrics metrics("m");
  // Tokens at 95.1, 95.6, 96.1 (TTFT 0.1 s in second 95, TPOT 0.5 s in second 96), and one at
  // 97.3 (TTFT 0.3 s in second 97).
  metrics.observe_sample(sample(95.0, 0.1, 3, 0.5), FinishReason::Stop);
  metrics.observe_request(10, 3, at(95.05));
  metrics.observe_sample(sample(97.0, 0.3, 1, 0), FinishReason::Length);
  metrics.observe_request(4, 1, at(97.2));
  // The page polled at 98.2 while 2 ran and 1 waited.
  metrics.dashboard({.running = 2, .waiting = 1}, at(98.2), kWallNow);

  const EngineGauges g{.running = 5, .waiting = 6, .kv_usage = 0.5, .preemptions_total = 7};
  const nlohmann::json d = metrics.dashboard(g, at(100.5), kWallNow);
  EXPECT_DOUBLE_EQ(d["time"].get<double>(), 1764600000.5);
  EXPECT_EQ(d["model"], "m");
  EXPECT_EQ(d["running"], 5);
  EXPECT_EQ(d["waiting"], 6);
  EXPECT_EQ(d["totals"], (nlohmann::json{{"requests", 2},
                                         {"prompt_tokens", 14},
                                         {"generation_tokens", 4},
                                         {"preemptions", 7},
                                         {"errors", 0}}));

  // The window: whole seconds 40..99.
  const auto& w = d["window"];
  EXPECT_EQ(w["seconds"], 60);
  EXPECT_DOUBLE_EQ(w["ttft_ms"]["p50"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(w["ttft_ms"]["p90"].get<double>(), 280.0);
  EXPECT_DOUBLE_EQ(w["ttft_ms"]["p99"].get<double>(), 298.0);
  EXPECT_DOUBLE_EQ(w["tpot_ms"]["p50"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(w["gen_tokens_per_s"].get<double>(), 0.07);  // 4 / 60, to 0.01

  // The series: 300 whole seconds, 99 the last, as unix seconds.
  const auto& series = d["series"];
  ASSERT_EQ(series.size(), 300u);
  for (size_t i = 0; i < series.size(); ++i) {
    EXPECT_EQ(series[i]["t"], 1764599999 - 299 + static_cast<int64_t>(i));
  }
  auto point = [&](int second) -> const nlohmann::json& { return series[299 - (99 - second)]; };
  EXPECT_EQ(point(95)["gen_tokens_per_s"], 2.0);
  EXPECT_EQ(point(96)["gen_tokens_per_s"], 1.0);
  EXPECT_EQ(point(97)["gen_tokens_per_s"], 1.0);
  EXPECT_EQ(point(98)["gen_tokens_per_s"], 0.0);
  EXPECT_EQ(point(95)["prompt_tokens_per_s"], 10.0);
  EXPECT_EQ(point(97)["prompt_tokens_per_s"], 4.0);
  // TTFT over the 10 s ending at each point.
  EXPECT_TRUE(point(94)["ttft_p50_ms"].is_null());
  EXPECT_EQ(point(95)["ttft_p50_ms"], 100.0);
  EXPECT_EQ(point(96)["ttft_p99_ms"], 100.0);
  EXPECT_EQ(point(97)["ttft_p50_ms"], 200.0);
  EXPECT_EQ(point(97)["ttft_p99_ms"], 298.0);
  EXPECT_TRUE(point(95)["tpot_p50_ms"].is_null());
  EXPECT_EQ(point(96)["tpot_p50_ms"], 500.0);
  EXPECT_EQ(point(99)["tpot_p99_ms"], 500.0);
  EXPECT_TRUE(series[0]["ttft_p50_ms"].is_null());
  // Load as last seen in each second.
  EXPECT_EQ(point(98)["running"], 2);
  EXPECT_EQ(point(98)["waiting"], 1);
  EXPECT_TRUE(point(99)["running"].is_null());
  EXPECT_TRUE(point(97)["waiting"].is_null());

  // Ten seconds on, the TTFT of second 95 has left every trailing window but the oldest ones.
  const auto later = metrics.dashboard(g, at(110.5), kWallNow + std::chrono::seconds(10));
  EXPECT_EQ(later["series"][299]["t"], 1764600009);
  EXPECT_EQ(later["series"][299 - 4]["ttft_p50_ms"], 300.0);       // 105: 96..105 holds 97's
  EXPECT_TRUE(later["series"][299 - 2]["ttft_p50_ms"].is_null());  // 107: 98..107
  EXPECT_EQ(later["series"][299 - 9]["running"], 5);  // second 100, from the call at 100.5
}

TEST(ServerMetricsDashboardTest, EmptyDashboardHasNullPercentiles) {
  ServerMetrics metrics("m", std::chrono::seconds(30));
  const auto d = metrics.dashboard({}, at(0.2), kWallNow);
  EXPECT_EQ(d["series"].size(), 30u);
  EXPECT_TRUE(d["window"]["ttft_ms"]["p50"].is_null());
  EXPECT_TRUE(d["window"]["tpot_ms"]["p99"].is_null());
  EXPECT_EQ(d["window"]["gen_tokens_per_s"], 0.0);
  for (const auto& p : d["series"]) {
    EXPECT_TRUE(p["ttft_p50_ms"].is_null());
    EXPECT_TRUE(p["running"].is_null());
    EXPECT_EQ(p["gen_tokens_per_s"], 0.0);
  }
  EXPECT_EQ(d["totals"]["requests"], 0);
}

TEST(ServerMetricsDashboardTest, TokensOlderThanTheSeriesAreDropped) {
  ServerMetrics metrics("m", std::chrono::seconds(30));
  metrics.dashboard({}, at(1000), kWallNow);
  metrics.observe_sample(sample(0, 0.1, 50, 0.1), FinishReason::Stop);  // long ago
  const auto d = metrics.dashboard({}, at(1001), kWallNow);
  EXPECT_EQ(d["window"]["gen_tokens_per_s"], 0.0);
  EXPECT_TRUE(d["window"]["ttft_ms"]["p50"].is_null());
}

TEST(ServerMetricsDashboardTest, MemoryStaysBoundedOverHours) {
  ServerMetrics metrics("m");
  // A million samples, one every 10 ms: 10,000 simulated seconds (2.8 hours), 2 tokens each.
  SampleMetrics s;
  s.output_tokens = 2;
  s.token_times.resize(2);
  size_t footprint_after_10_minutes = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const Clock::time_point t = kT0 + std::chrono::milliseconds(10) * i;
    s.arrival = t;
    s.first_scheduled = t;
    s.first_token = t + std::chrono::milliseconds(5);
    s.token_times[0] = s.first_token;
    s.token_times[1] = t + std::chrono::milliseconds(8);
    s.finished = s.token_times[1];
    metrics.observe_sample(s, FinishReason::Stop);
    metrics.observe_request(1, 2, t);
    if (i == 60'000) footprint_after_10_minutes = metrics.series_footprint_bytes();
  }
  const size_t footprint = metrics.series_footprint_bytes();
  EXPECT_EQ(footprint, footprint_after_10_minutes);
  EXPECT_LT(footprint, size_t{1} << 20);

  const auto d = metrics.dashboard({}, kT0 + std::chrono::seconds(10'000), kWallNow);
  EXPECT_EQ(d["totals"]["requests"], 1'000'000);
  EXPECT_DOUBLE_EQ(d["window"]["gen_tokens_per_s"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(d["window"]["ttft_ms"]["p50"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(d["window"]["tpot_ms"]["p99"].get<double>(), 3.0);
  EXPECT_EQ(d["series"][299]["gen_tokens_per_s"], 200.0);
  EXPECT_EQ(d["series"][299]["prompt_tokens_per_s"], 100.0);
}

}  // namespace
}  // namespace tokamak::server
