// The figures of `tokamak bench serve` from synthetic timestamps, goodput, the JSON shape,
// the tables and the HTML page.

#include "cli/bench_serve_metrics.h"

#include <gtest/gtest.h>

#include "cli/bench_serve_html.h"

namespace tokamak::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const BenchClock::time_point kStart = BenchClock::time_point{} + 100s;

// Counts one token per character: easy to reason about.
const TokenCounter kChars = [](std::string_view text) { return static_cast<int64_t>(text.size()); };

// A completed request: sent at `sent`, text chunks at `chunks` (one character each), ended
// at `end` (offsets from kStart in ms).
RequestRecord completed(double sent, std::vector<double> chunks, double end,
                        std::optional<int64_t> usage_tokens) {
  const auto at = [](double ms) {
    return kStart + std::chrono::duration_cast<BenchClock::duration>(
                        std::chrono::duration<double, std::milli>(ms));
  };
  RequestRecord r;
  r.sent = at(sent);
  r.ended = at(end);
  r.http_status = 200;
  for (double c : chunks) {
    r.trace.content_times.push_back(at(c));
    r.trace.text += "x";
  }
  r.trace.completion_tokens = usage_tokens;
  if (usage_tokens) r.trace.prompt_tokens = 10;
  r.trace.done = true;
  return r;
}

RequestRecord failed(double sent, std::string why) {
  RequestRecord r;
  r.sent = kStart + std::chrono::milliseconds(static_cast<int64_t>(sent));
  r.ended = r.sent;
  r.failure = std::move(why);
  return r;
}

TEST(BenchServeMetricsTest, OneRequestFromItsTimestamps) {
  const RequestRecord r = completed(10, {60, 70, 90, 100}, 110, 5);
  const RequestFigures f = request_figures(r, kStart, 99, kChars);
  EXPECT_FALSE(f.failure);
  EXPECT_DOUBLE_EQ(f.start_ms, 10);
  EXPECT_DOUBLE_EQ(*f.ttft_ms, 50);
  EXPECT_DOUBLE_EQ(*f.e2e_ms, 100);
  EXPECT_DOUBLE_EQ(*f.tpot_ms, 50.0 / 4);  // (E2E - TTFT) / (5 - 1): usage says 5 tokens
  EXPECT_EQ(f.itl_ms, (std::vector<double>{10, 20, 10}));
  EXPECT_EQ(f.output_tokens, 5);
  EXPECT_EQ(f.tokenizer_tokens, 4);
  EXPECT_TRUE(f.usage_reported);
  EXPECT_EQ(f.prompt_tokens, 10);  // the server's count wins over the dataset's 99
}

TEST(BenchServeMetricsTest, WithoutUsageTheTokenizerCounts) {
  const RequestFigures f =
      request_figures(completed(0, {20}, 20, std::nullopt), kStart, 99, kChars);
  EXPECT_FALSE(f.usage_reported);
  EXPECT_EQ(f.output_tokens, 1);
  EXPECT_EQ(f.prompt_tokens, 99);
  EXPECT_FALSE(f.tpot_ms);  // one token: no TPOT
  EXPECT_TRUE(f.itl_ms.empty());
}

std::vector<BenchPrompt> prompts(size_t n, int32_t output_len) {
  std::vector<BenchPrompt> p(n);
  for (BenchPrompt& x : p) {
    x.prompt_tokens = 10;
    x.output_len = output_len;
  }
  return p;
}

LoadResult sample_load() {
  LoadResult load;
  load.start = kStart;
  load.end = kStart + 2s;
  load.peak_in_flight = 3;
  load.records = {completed(0, {100, 200, 300}, 300, 3),      // TTFT 100, TPOT 100
                  completed(0, {400, 450, 500}, 500, 3),      // TTFT 400, TPOT 50
                  completed(500, {600, 900, 1200}, 1200, 4),  // TTFT 100, TPOT 200; usage 4 != 3
                  failed(700, "HTTP 503: busy"),
                  failed(800, "HTTP 503: busy"),
                  completed(900, {1000, 1010, 1020}, 2000, std::nullopt)};  // TTFT 100, TPOT 500
  return load;
}

TEST(BenchServeMetricsTest, RunFiguresAndGoodput) {
  const LoadResult load = sample_load();
  const auto p = prompts(load.records.size(), 3);
  const RunFigures f = run_figures(load, p, {.ttft_ms = 200, .tpot_ms = 150}, kChars);
  EXPECT_EQ(f.completed, 4);
  EXPECT_EQ(f.failed, 2);
  ASSERT_EQ(f.errors.size(), 1u);
  EXPECT_EQ(f.errors[0].message, "HTTP 503: busy");
  EXPECT_EQ(f.errors[0].count, 2);
  EXPECT_DOUBLE_EQ(f.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(f.requests_per_s, 2.0);
  EXPECT_EQ(f.output_tokens, 3 + 3 + 4 + 3);
  EXPECT_EQ(f.prompt_tokens, 10 * 4);
  EXPECT_DOUBLE_EQ(f.output_tokens_per_s, 13 / 2.0);
  EXPECT_DOUBLE_EQ(f.total_tokens_per_s, 53 / 2.0);
  EXPECT_EQ(f.peak_concurrency, 3);
  ASSERT_TRUE(f.ttft_ms);
  EXPECT_EQ(f.ttft_ms->count, 4u);
  EXPECT_DOUBLE_EQ(f.ttft_ms->mean, 175);
  EXPECT_DOUBLE_EQ(f.ttft_ms->p50, 100);
  EXPECT_DOUBLE_EQ(f.tpot_ms->max, 500);
  EXPECT_EQ(f.itl_ms->count, 8u);
  EXPECT_DOUBLE_EQ(f.e2e_ms->max, 1100);
  // Within TTFT <= 200 and TPOT <= 150: only the first request.
  EXPECT_EQ(f.slo_met, 1);
  EXPECT_DOUBLE_EQ(*f.goodput_rps, 0.5);
  EXPECT_EQ(f.usage_missing, 1);
  EXPECT_EQ(f.token_count_mismatches, 1);
  EXPECT_EQ(f.output_len_mismatches, 1);  // 4 tokens where 3 were asked for
  EXPECT_EQ(f.requests.size(), 6u);
}

TEST(BenchServeMetricsTest, GoodputNeedsAnSlo) {
  const LoadResult load = sample_load();
  const auto p = prompts(load.records.size(), 3);
  EXPECT_FALSE(run_figures(load, p, {}, kChars).goodput_rps);
  EXPECT_EQ(run_figures(load, p, {.ttft_ms = 150, .tpot_ms = {}}, kChars).slo_met, 3);
  EXPECT_EQ(run_figures(load, p, {.ttft_ms = {}, .tpot_ms = 100}, kChars).slo_met, 2);
}

TEST(BenchServeMetricsTest, ErrorKindsAreCapped) {
  LoadResult load;
  load.start = load.end = kStart;
  for (int i = 0; i < 8; ++i) load.records.push_back(failed(0, "reason " + std::to_string(i)));
  load.records.push_back(failed(0, "reason 0"));
  const RunFigures f = run_figures(load, prompts(9, 3), {}, kChars);
  EXPECT_EQ(f.failed, 9);
  ASSERT_EQ(f.errors.size(), kErrorKinds);
  EXPECT_EQ(f.errors[0].count, 2);
  EXPECT_EQ(f.other_errors, 3);
  EXPECT_EQ(f.requests_per_s, 0);  // no duration: no division by zero
  EXPECT_FALSE(f.ttft_ms);
}

json sample_run(std::optional<int32_t> concurrency, const std::string& label = "srv") {
  const LoadResult load = sample_load();
  const RunFigures f =
      run_figures(load, prompts(load.records.size(), 3), {.ttft_ms = 200, .tpot_ms = {}}, kChars);
  return run_json(f, {{"label", label},
                      {"url", "http://h:1"},
                      {"endpoint", "completions"},
                      {"model", "m"},
                      {"dataset", "random"},
                      {"num_prompts", 6},
                      {"input_len", 10},
                      {"output_len", 3},
                      {"request_rate", nullptr},
                      {"max_concurrency", concurrency ? json(*concurrency) : json()},
                      {"slo_ttft_ms", 200},
                      {"slo_tpot_ms", nullptr}});
}

TEST(BenchServeMetricsTest, JsonShape) {
  const json run = sample_run(4);
  for (const char* key : {"label",
                          "settings",
                          "completed",
                          "failed",
                          "errors",
                          "duration_s",
                          "requests_per_s",
                          "output_tokens_per_s",
                          "total_tokens_per_s",
                          "prompt_tokens",
                          "output_tokens",
                          "peak_concurrency",
                          "ttft_ms",
                          "tpot_ms",
                          "itl_ms",
                          "e2e_ms",
                          "slo_met",
                          "goodput_rps",
                          "usage_missing",
                          "token_count_mismatches",
                          "output_len_mismatches",
                          "requests"}) {
    EXPECT_TRUE(run.contains(key)) << key;
  }
  EXPECT_EQ(run["label"], "srv");
  EXPECT_EQ(run["settings"]["max_concurrency"], 4);
  for (const char* key : {"mean", "p50", "p90", "p99"}) EXPECT_TRUE(run["ttft_ms"].contains(key));
  const json& req = run["requests"];
  for (const char* key : {"ok", "failure", "start_ms", "ttft_ms", "tpot_ms", "e2e_ms", "itl_ms",
                          "prompt_tokens", "output_tokens"}) {
    ASSERT_TRUE(req.contains(key)) << key;
    EXPECT_EQ(req[key].size(), 6u) << key;
  }
  EXPECT_EQ(req["ok"][3], false);
  EXPECT_EQ(req["failure"][3], "HTTP 503: busy");
  EXPECT_TRUE(req["ttft_ms"][3].is_null());
  EXPECT_DOUBLE_EQ(req["ttft_ms"][1].get<double>(), 400);
  EXPECT_EQ(req["itl_ms"][0], json::array({100.0, 100.0}));
  EXPECT_EQ(json::parse(run.dump()), run);  // plain JSON: survives a round trip
}

TEST(BenchServeMetricsTest, TablesFromJson) {
  const std::string one = format_run(sample_run(4));
  EXPECT_NE(one.find("completed         4 (2 failed)"), std::string::npos) << one;
  EXPECT_NE(one.find("2 x HTTP 503: busy"), std::string::npos) << one;
  EXPECT_NE(one.find("goodput"), std::string::npos);
  const std::vector<json> runs = {sample_run(1), sample_run(4)};
  const std::string table = format_runs_table(runs);
  EXPECT_EQ(table.find("label"), std::string::npos);  // one label: no label column
  EXPECT_NE(table.find("TTFT p99"), std::string::npos);
  EXPECT_NE(table.find("goodput"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);
  const std::vector<json> two = {sample_run(1, "a"), sample_run(1, "b")};
  EXPECT_EQ(format_runs_table(two).rfind("label", 0), 0u);
}

TEST(BenchServeHtmlTest, SelfContainedPageWithTheData) {
  std::vector<json> runs = {sample_run(1, "tokamak"), sample_run(4, "llama.cpp")};
  runs[0]["label"] = "</script><b>";
  const std::string page = html_report(runs);
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);  // nothing loaded from the network
  EXPECT_EQ(page.find("__DATA__"), std::string::npos);
  // Only the page's own </script> closes the script.
  EXPECT_EQ(page.find("</script>"), page.rfind("</script>"));
  const json data = html_chart_data(runs);
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[1]["label"], "llama.cpp");
  EXPECT_EQ(data[1]["concurrency"], 4);
  EXPECT_EQ(data[0]["cdf"]["ttft"], json::array({100.0, 100.0, 100.0, 400.0}));  // sorted, no nulls
  EXPECT_EQ(data[0]["cdf"]["e2e"].size(), 4u);
}

}  // namespace
}  // namespace tokamak::cli
