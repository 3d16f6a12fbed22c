#include "server/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tokamak::server::metrics_test {
namespace {

// Synthetic steady-clock times: whole seconds from a fixed origin, far from any real now.
const Clock::time_point kT0 = Clock::time_point(std::chrono::hours(1000));
Clock::time_point at(double seconds) {
  return kT0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The samples of an exposition: "name{labels}" -> value.
std::map<std::string, double> samples_of(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

// One sample's value; fails the test when it is missing.
double value(const std::string& text, const std::string& key) {
  const auto samples = samples_of(text);
  const auto it = samples.find(key);
  EXPECT_NE(it, samples.end()) << key;
  return it == samples.end() ? -1 : it->second;
}

std::string m(const std::string& name) {
  return name + "{model_name=\"m\"}";
}
std::string bucket(const std::string& name, const std::string& le) {
  return name + "_bucket{model_name=\"m\",le=\"" + le + "\"}";
}

// A sample that arrived at `start`, was scheduled 0.5 s later, sampled its tokens at
// start + 0.75, 0.8 and 1.0 s and finished with the last.
SampleMetrics three_token_sample(double start) {
  SampleMetrics s;
  s.prompt_tokens = 5;
  s.output_tokens = 3;
  s.arrival = at(start);
  s.first_scheduled = at(start + 0.5);
  s.first_token = at(start + 0.75);
  s.token_times = {at(start + 0.75), at(start + 0.8), at(start + 1.0)};
  s.finished = at(start + 1.0);
  return s;
}

const EngineGauges kGauges{.running = 3,
                           .waiting = 2,
                           .kv_usage = 0.25,
                           .preemptions_total = 4,
                           .swaps_out_total = 3,
                           .swaps_in_total = 2,
                           .swap_lost_tokens_total = 16,
                           .prefix_cache_queries_total = 1000,
                           .prefix_cache_hits_total = 640,
                           .tier_host_hits_total = 7,
                           .tier_disk_hits_total = 5,
                           .tier_disk_rejected_total = 2,
                           .tier_host_bytes = 4096,
                           .kv_window_dropped_total = 96};

TEST(ServerMetricsTest, DerivesLatenciesFromSampleMetrics) {
  ServerMetrics metrics("m");
  metrics.observe_sample(three_token_sample(0), FinishReason::Stop);
  const std::string text = metrics.prometheus_text(kGauges);

  const std::string ttft = "tokamak:time_to_first_token_seconds";
  EXPECT_DOUBLE_EQ(value(text, m(ttft + "_sum")), 0.75);
  EXPECT_EQ(value(text, m(ttft + "_count")), 1);
  EXPECT_EQ(value(text, bucket(ttft, "0.5")), 0);
  EXPECT_EQ(value(text, bucket(ttft, "0.75")), 1);
  EXPECT_EQ(value(text, bucket(ttft, "+Inf")), 1);

  const std::string queue = "tokamak:request_queue_time_seconds";
  EXPECT_DOUBLE_EQ(value(text, m(queue + "_sum")), 0.5);
  EXPECT_EQ(value(text, bucket(queue, "0.3")), 0);
  EXPECT_EQ(value(text, bucket(queue, "0.5")), 1);

  const std::string e2e = "tokamak:e2e_request_latency_seconds";
  EXPECT_DOUBLE_EQ(value(text, m(e2e + "_sum")), 1.0);
  EXPECT_EQ(value(text, bucket(e2e, "0.8")), 0);
  EXPECT_EQ(value(text, bucket(e2e, "1.0")), 1);

  // Gaps 0.05 and 0.2 s.
  const std::string itl = "tokamak:inter_token_latency_seconds";
  EXPECT_EQ(value(text, m(itl + "_count")), 2);
  EXPECT_DOUBLE_EQ(value(text, m(itl + "_sum")), 0.25);
  EXPECT_EQ(value(text, bucket(itl, "0.025")), 0);
  EXPECT_EQ(value(text, bucket(itl, "0.05")), 1);
  EXPECT_EQ(value(text, bucket(itl, "0.2")), 2);

  // (1.0 - 0.75) / (3 - 1).
  const std::string tpot = "tokamak:request_time_per_output_token_seconds";
  EXPECT_EQ(value(text, m(tpot + "_count")), 1);
  EXPECT_DOUBLE_EQ(value(text, m(tpot + "_sum")), 0.125);
  EXPECT_EQ(value(text, bucket(tpot, "0.1")), 0);
  EXPECT_EQ(value(text, bucket(tpot, "0.15")), 1);
}

TEST(ServerMetricsTest, OneTokenSampleHasNoTimePerOutputToken) {
  ServerMetrics metrics("m");
  SampleMetrics s = three_token_sample(0);
  s.output_tokens = 1;
  s.token_times.resize(1);
  s.finished = s.first_token;
  metrics.observe_sample(s, FinishReason::Length);
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_EQ(value(text, m("tokamak:request_time_per_output_token_seconds_count")), 0);
  EXPECT_EQ(value(text, m("tokamak:inter_token_latency_seconds_count")), 0);
  EXPECT_EQ(value(text, m("tokamak:time_to_first_token_seconds_count")), 1);
}

TEST(ServerMetricsTest, FinishReasonsMapToVllmLabels) {
  ServerMetrics metrics("m");
  metrics.observe_sample(three_token_sample(0), FinishReason::Stop);
  metrics.observe_sample(three_token_sample(0), FinishReason::Stop);
  metrics.observe_sample(three_token_sample(0), FinishReason::Length);
  metrics.observe_sample(three_token_sample(0), FinishReason::Cancelled);
  metrics.observe_sample(three_token_sample(0), FinishReason::Error);
  const std::string text = metrics.prometheus_text(kGauges);
  auto success = [&](const std::string& reason) {
    return value(
        text, "tokamak:request_success_total{model_name=\"m\",finished_reason=\"" + reason + "\"}");
  };
  EXPECT_EQ(success("stop"), 2);
  EXPECT_EQ(success("length"), 1);
  EXPECT_EQ(success("abort"), 1);
  EXPECT_EQ(success("error"), 1);
  // Error: no latency at all. Cancelled: TTFT, queue time and token gaps, not e2e or TPOT.
  EXPECT_EQ(value(text, m("tokamak:time_to_first_token_seconds_count")), 4);
  EXPECT_EQ(value(text, m("tokamak:request_queue_time_seconds_count")), 4);
  EXPECT_EQ(value(text, m("tokamak:inter_token_latency_seconds_count")), 8);
  EXPECT_EQ(value(text, m("tokamak:e2e_request_latency_seconds_count")), 3);
  EXPECT_EQ(value(text, m("tokamak:request_time_per_output_token_seconds_count")), 3);
}

TEST(ServerMetricsTest, UnsetTimesGiveNoObservation) {
  // Cancelled while queued: never scheduled, no token.
  SampleMetrics s;
  s.prompt_tokens = 5;
  s.arrival = at(0);
  s.finished = at(2);
  ServerMetrics metrics("m");
  metrics.observe_sample(s, FinishReason::Cancelled);
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_EQ(
      value(text, "tokamak:request_success_total{model_name=\"m\",finished_reason=\"abort\"}"), 1);
  for (const char* h : {"time_to_first_token_seconds", "request_queue_time_seconds",
                        "inter_token_latency_seconds", "e2e_request_latency_seconds"}) {
    EXPECT_EQ(value(text, m(std::string("tokamak:") + h + "_count")), 0) << h;
  }
}

TEST(ServerMetricsTest, RequestsCountTheirTokens) {
  ServerMetrics metrics("m");
  metrics.observe_request(5, 7, at(0));
  metrics.observe_request(100, 0, at(1));
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_EQ(value(text, m("tokamak:prompt_tokens_total")), 105);
  EXPECT_EQ(value(text, m("tokamak:generation_tokens_total")), 7);
  const std::string prompt = "tokamak:request_prompt_tokens";
  EXPECT_EQ(value(text, bucket(prompt, "2.0")), 0);
  EXPECT_EQ(value(text, bucket(prompt, "5.0")), 1);
  EXPECT_EQ(value(text, bucket(prompt, "50.0")), 1);
  EXPECT_EQ(value(text, bucket(prompt, "100.0")), 2);
  EXPECT_EQ(value(text, bucket(prompt, "1000000.0")), 2);
  EXPECT_EQ(value(text, m(prompt + "_sum")), 105);
  const std::string gen = "tokamak:request_generation_tokens";
  EXPECT_EQ(value(text, bucket(gen, "1.0")), 1);  // the request that generated nothing
  EXPECT_EQ(value(text, bucket(gen, "10.0")), 2);
}

TEST(ServerMetricsTest, CountsErrorsByStatus) {
  ServerMetrics metrics("m");
  metrics.count_error(400);
  metrics.count_error(429);
  metrics.count_error(400);
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_EQ(value(text, "tokamak:request_errors_total{model_name=\"m\",code=\"400\"}"), 2);
  EXPECT_EQ(value(text, "tokamak:request_errors_total{model_name=\"m\",code=\"429\"}"), 1);
  EXPECT_EQ(metrics.dashboard(kGauges, at(10))["totals"]["errors"], 3);
}

TEST(ServerMetricsTest, StepsFillTheIterationTokensHistogram) {
  ServerMetrics metrics("m");
  for (int32_t n : {1, 8, 9, 20000}) metrics.observe_step(n, at(0));
  const std::string text = metrics.prometheus_text(kGauges);
  const std::string it = "tokamak:iteration_tokens";
  EXPECT_EQ(value(text, bucket(it, "1.0")), 1);
  EXPECT_EQ(value(text, bucket(it, "8.0")), 2);
  EXPECT_EQ(value(text, bucket(it, "16.0")), 3);
  EXPECT_EQ(value(text, bucket(it, "16384.0")), 3);
  EXPECT_EQ(value(text, bucket(it, "+Inf")), 4);
  EXPECT_EQ(value(text, m(it + "_sum")), 20018);
}

TEST(ServerMetricsTest, ExposesTheGaugesGiven) {
  ServerMetrics metrics("m");
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_EQ(value(text, m("tokamak:num_requests_running")), 3);
  EXPECT_EQ(value(text, m("tokamak:num_requests_waiting")), 2);
  EXPECT_EQ(value(text, m("tokamak:kv_cache_usage_perc")), 0.25);
  EXPECT_EQ(value(text, m("tokamak:num_preemptions_total")), 4);
  EXPECT_EQ(value(text, m("tokamak:prefix_cache_queries_total")), 1000);
  EXPECT_EQ(value(text, m("tokamak:prefix_cache_hits_total")), 640);
  EXPECT_EQ(value(text, m("tokamak:kv_window_dropped_tokens_total")), 96);
  EXPECT_EQ(value(text, "tokamak:kv_swaps_total{model_name=\"m\",direction=\"out\"}"), 3);
  EXPECT_EQ(value(text, "tokamak:kv_swaps_total{model_name=\"m\",direction=\"in\"}"), 2);
  EXPECT_EQ(value(text, m("tokamak:kv_swap_recomputed_tokens_total")), 16);
  const auto tier = [](const std::string& name, const char* t) {
    return name + "{model_name=\"m\",tier=\"" + t + "\"}";
  };
  EXPECT_EQ(value(text, tier("tokamak:prefix_cache_tier_hits_total", "host")), 7);
  EXPECT_EQ(value(text, tier("tokamak:prefix_cache_tier_hits_total", "disk")), 5);
  EXPECT_EQ(value(text, tier("tokamak:prefix_cache_tier_bytes", "host")), 4096);
  EXPECT_EQ(value(text, m("tokamak:prefix_cache_disk_rejected_total")), 2);
}

TEST(ServerMetricsTest, ExposesEveryFamilyTypedAndLabelled) {
  ServerMetrics metrics("m");
  metrics.count_error(500);
  const std::string text = metrics.prometheus_text(kGauges);
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const size_t space = line.find(' ', 7);
      types[line.substr(7, space - 7)] = line.substr(space + 1);
    } else if (line.rfind("# HELP ", 0) == 0) {
      helps.insert(line.substr(7, line.find(' ', 7) - 7));
    } else {
      EXPECT_NE(line.find("{model_name=\"m\""), std::string::npos) << line;
    }
  }
  const std::map<std::string, std::string> expected = {
      {"tokamak:time_to_first_token_seconds", "histogram"},
      {"tokamak:inter_token_latency_seconds", "histogram"},
      {"tokamak:request_time_per_output_token_seconds", "histogram"},
      {"tokamak:e2e_request_latency_seconds", "histogram"},
      {"tokamak:request_queue_time_seconds", "histogram"},
      {"tokamak:request_prompt_tokens", "histogram"},
      {"tokamak:request_generation_tokens", "histogram"},
      {"tokamak:iteration_tokens", "histogram"},
      {"tokamak:num_requests_running", "gauge"},
      {"tokamak:num_requests_waiting", "gauge"},
      {"tokamak:kv_cache_usage_perc", "gauge"},
      {"tokamak:prompt_tokens_total", "counter"},
      {"tokamak:generation_tokens_total", "counter"},
      {"tokamak:request_success_total", "counter"},
      {"tokamak:num_preemptions_total", "counter"},
      {"tokamak:kv_swaps_total", "counter"},
      {"tokamak:kv_swap_recomputed_tokens_total", "counter"},
      {"tokamak:prefix_cache_queries_total", "counter"},
      {"tokamak:prefix_cache_hits_total", "counter"},
      {"tokamak:prefix_cache_tier_hits_total", "counter"},
      {"tokamak:prefix_cache_tier_stores_total", "counter"},
      {"tokamak:prefix_cache_tier_evictions_total", "counter"},
      {"tokamak:prefix_cache_tier_bytes", "gauge"},
      {"tokamak:prefix_cache_disk_rejected_total", "counter"},
      {"tokamak:kv_window_dropped_tokens_total", "counter"},
      {"tokamak:request_errors_total", "counter"},
  };
  EXPECT_EQ(types, expected);
  EXPECT_EQ(helps.size(), expected.size());
}

TEST(ServerMetricsTest, EscapesTheModelName) {
  ServerMetrics metrics("we\"ird\\na\nme");
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_NE(text.find("tokamak:num_requests_running{model_name=\"we\\\"ird\\\\na\\nme\"} 3\n"),
            std::string::npos);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    EXPECT_TRUE(line.rfind("tokamak:", 0) == 0 || line.rfind("# ", 0) == 0) << line;
  }
}

// Runs tests/integration/check_prometheus_text.py on `text` (written to the file `name`)
// with `args`; its exit status, with its output in *log. The temporary files are removed
// either way (TempDir is /tmp, shared by every run).
int check_with_prometheus_client(const std::string& text, const std::string& name,
                                 const std::string& args, std::string* log) {
  const std::string path = ::testing::TempDir() + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  const std::string cmd =
      std::string("python3 " TOKAMAK_SOURCE_DIR "/tests/integration/check_prometheus_text.py ") +
      path + " " + args + " > " + path + ".log 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(path + ".log");
  log->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  std::remove((path + ".log").c_str());
  return status;
}

bool have_prometheus_client() {
  return std::system("python3 -c 'import prometheus_client' > /dev/null 2>&1") == 0;
}

TEST(ServerMetricsTest, ParsesWithPrometheusClient) {
  if (!have_prometheus_client()) GTEST_SKIP() << "python3 with prometheus_client not found";
  for (const std::string name : {"SmolLM2-135M-Instruct.Q4_1", "we\"ird\\na\nme"}) {
    ServerMetrics metrics(name);
    metrics.observe_sample(three_token_sample(0), FinishReason::Stop);
    metrics.observe_sample(three_token_sample(1), FinishReason::Cancelled);
    metrics.observe_request(5, 3, at(1));
    metrics.observe_step(12, at(1));
    metrics.count_error(400);
    const bool plain = name.find('"') == std::string::npos;
    std::string log;
    EXPECT_EQ(check_with_prometheus_client(metrics.prometheus_text(kGauges), "metrics_ok.txt",
                                           plain ? "--model-name " + name : "", &log),
              0)
        << name << "\n"
        << log;
  }
  // And the checker does catch a counter whose TYPE line lacks _total.
  std::string log;
  EXPECT_NE(check_with_prometheus_client("# TYPE a counter\na_total{model_name=\"m\"} 1\n",
                                         "metrics_bad.txt", "", &log),
            0)
      << log;
}

TEST(ServerMetricsTest, ThreadSafetySmoke) {
  ServerMetrics metrics("m");
  constexpr int kSteps = 20000;
  constexpr int kSamples = 1000;
  std::atomic<bool> done{false};
  std::atomic<int> renders{0};
  std::thread reader([&] {
    while (!done.load()) {
      EXPECT_FALSE(metrics.prometheus_text(kGauges).empty());
      EXPECT_EQ(metrics.dashboard(kGauges, Clock::now())["series"].size(), 300u);
      ++renders;
    }
  });
  while (renders.load() == 0) std::this_thread::yield();  // the writers race a live reader
  std::vector<std::thread> writers;
  writers.emplace_back([&] {
    for (int i = 0; i < kSteps; ++i) metrics.observe_step(i % 300, Clock::now());
  });
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < kSamples; ++i) {
        const Clock::time_point t = Clock::now();
        SampleMetrics s;
        s.output_tokens = 2;
        s.arrival = t;
        s.first_scheduled = t;
        s.first_token = t;
        s.token_times = {t, t};
        s.finished = t;
        metrics.observe_sample(s, FinishReason::Stop);
        metrics.observe_request(3, 2);
        metrics.count_error(400);
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  const std::string text = metrics.prometheus_text(kGauges);
  EXPECT_EQ(value(text, m("tokamak:iteration_tokens_count")), kSteps);
  EXPECT_EQ(value(text, m("tokamak:time_to_first_token_seconds_count")), 3 * kSamples);
  EXPECT_EQ(value(text, m("tokamak:prompt_tokens_total")), 3 * 3 * kSamples);
  EXPECT_EQ(value(text, "tokamak:request_errors_total{model_name=\"m\",code=\"400\"}"),
            3 * kSamples);
  const auto d = metrics.dashboard(kGauges, Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(d["totals"]["requests"], 3 * kSamples);
  EXPECT_EQ(d["totals"]["generation_tokens"], 3 * 2 * kSamples);
}

}  // namespace
}  // namespace tokamak::server::metrics_test
