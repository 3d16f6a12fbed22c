#include "server/metrics.h"

#include <algorithm>
#include <cassert>
#include <nlohmann/json.hpp>
#include <utility>

#include "server/metrics_text.h"

namespace tokamak::server {

namespace {

// Request sizes in tokens: buckets 1, 2, 5, ... 1e6 (vLLM stops at max_model_len).
constexpr double kMaxTokenBucket = 1e6;

// The reason label of request_success_total, by FinishReason.
constexpr std::array<std::pair<FinishReason, const char*>, 4> kReasonLabels = {{
    {FinishReason::Stop, "stop"},
    {FinishReason::Length, "length"},
    {FinishReason::Cancelled, "abort"},
    {FinishReason::Error, "error"},
}};

size_t reason_index(FinishReason reason) {
  for (size_t i = 0; i < kReasonLabels.size(); ++i) {
    if (kReasonLabels[i].first == reason) return i;
  }
  assert(false && "unknown FinishReason");
  return 0;
}

bool is_set(Clock::time_point t) {
  return t != Clock::time_point{};
}

// to - from in seconds, nullopt when either is unset; never negative.
std::optional<double> seconds_between(Clock::time_point from, Clock::time_point to) {
  if (!is_set(from) || !is_set(to)) return std::nullopt;
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

double seconds_since_epoch(auto time_point) {
  return std::chrono::duration<double>(time_point.time_since_epoch()).count();
}

}  // namespace

ServerMetrics::ServerMetrics(std::string model_name, Clock::duration series_window)
    : model_name_(std::move(model_name)),
      series_points_(std::chrono::ceil<std::chrono::seconds>(series_window).count()),
      ttft_(ttft_buckets()),
      inter_token_(token_gap_buckets()),
      time_per_output_token_(token_gap_buckets()),
      e2e_(request_time_buckets()),
      queue_time_(request_time_buckets()),
      prompt_tokens_hist_(one_two_five_buckets(kMaxTokenBucket)),
      generation_tokens_hist_(one_two_five_buckets(kMaxTokenBucket)),
      iteration_tokens_(iteration_token_buckets()),
      // The series and the trailing percentiles of its oldest point, or the minute window,
      // whichever reaches further back, the second in progress and a margin for samples
      // stamped a little after the `now` a dashboard() call is given.
      series_(std::max(series_points_, kWindowSeconds) + kTrailingSeconds + 2) {
  assert(series_points_ >= 1);
}

void ServerMetrics::observe_step(int32_t n_tokens, Clock::time_point /*when*/) {
  assert(n_tokens >= 0);
  std::lock_guard lock(mu_);
  iteration_tokens_.observe(n_tokens);
}

void ServerMetrics::observe_sample(const SampleMetrics& m, FinishReason reason) {
  const auto ttft = seconds_between(m.arrival, m.first_token);
  const auto queue = seconds_between(m.arrival, m.first_scheduled);
  const auto e2e = seconds_between(m.arrival, m.finished);
  std::optional<double> tpot;
  if (m.output_tokens > 1) {
    if (const auto decode = seconds_between(m.first_token, m.finished)) {
      tpot = *decode / (m.output_tokens - 1);
    }
  }
  const bool timed = reason != FinishReason::Error;
  const bool completed = reason == FinishReason::Stop || reason == FinishReason::Length;

  std::lock_guard lock(mu_);
  ++finished_[reason_index(reason)];
  // The tokens were generated whatever the end: they count in the dashboard's tokens/s, in
  // runs of equal seconds so that a long sample costs one slot lookup per second.
  const auto& times = m.token_times;
  for (size_t i = 0; i < times.size();) {
    const int64_t second = RecentSeries::second_of(times[i]);
    size_t j = i + 1;
    while (j < times.size() && RecentSeries::second_of(times[j]) == second) ++j;
    series_.add_generation_tokens(times[i], static_cast<int64_t>(j - i));
    i = j;
  }
  if (!timed) return;
  if (ttft) {
    ttft_.observe(*ttft);
    series_.add_ttft(m.first_token, *ttft);
  }
  if (queue) queue_time_.observe(*queue);
  for (size_t i = 1; i < times.size(); ++i) {
    inter_token_.observe(
        std::max(0.0, std::chrono::duration<double>(times[i] - times[i - 1]).count()));
  }
  if (!completed) return;
  if (e2e) e2e_.observe(*e2e);
  if (tpot) {
    time_per_output_token_.observe(*tpot);
    series_.add_tpot(m.finished, *tpot);
  }
}

void ServerMetrics::observe_request(int32_t prompt_tokens, int32_t generation_tokens,
                                    std::optional<Clock::time_point> prefilled) {
  assert(prompt_tokens >= 0 && generation_tokens >= 0);
  const Clock::time_point when = prefilled.value_or(Clock::now());
  std::lock_guard lock(mu_);
  ++requests_;
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generation_tokens_ += static_cast<uint64_t>(generation_tokens);
  prompt_tokens_hist_.observe(prompt_tokens);
  generation_tokens_hist_.observe(generation_tokens);
  series_.add_prompt_tokens(when, prompt_tokens);
}

void ServerMetrics::count_error(int http_status) {
  assert(http_status >= 100 && http_status <= 599);  // keeps the label set small
  std::lock_guard lock(mu_);
  ++errors_[http_status];
}

std::string ServerMetrics::prometheus_text(const EngineGauges& g) const {
  PrometheusWriter w({{"model_name", model_name_}});
  w.family("tokamak:num_requests_running", "gauge",
           "Number of requests in model execution batches.");
  w.sample("tokamak:num_requests_running", static_cast<double>(g.running));
  w.family("tokamak:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  w.sample("tokamak:num_requests_waiting", static_cast<double>(g.waiting));
  w.family("tokamak:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  w.sample("tokamak:kv_cache_usage_perc", g.kv_usage);
  w.family("tokamak:num_preemptions_total", "counter",
           "Cumulative number of preemption from the engine.");
  w.sample("tokamak:num_preemptions_total",
           static_cast<uint64_t>(std::max<int64_t>(0, g.preemptions_total)));
  w.family("tokamak:prefix_cache_queries_total", "counter",
           "Prefix cache queries, in terms of number of queried tokens.");
  w.sample("tokamak:prefix_cache_queries_total",
           static_cast<uint64_t>(std::max<int64_t>(0, g.prefix_cache_queries_total)));
  w.family("tokamak:prefix_cache_hits_total", "counter",
           "Prefix cache hits, in terms of number of cached tokens.");
  w.sample("tokamak:prefix_cache_hits_total",
           static_cast<uint64_t>(std::max<int64_t>(0, g.prefix_cache_hits_total)));
  const auto count = [](int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(0, v)); };
  w.family("tokamak:kv_swaps_total", "counter",
           "Sequences whose KV cache was swapped out of the pool by preemption, and back in.");
  w.sample("tokamak:kv_swaps_total", count(g.swaps_out_total), {{"direction", "out"}});
  w.sample("tokamak:kv_swaps_total", count(g.swaps_in_total), {{"direction", "in"}});
  w.family("tokamak:kv_swap_recomputed_tokens_total", "counter",
           "Computed tokens a swapped-out sequence computed again because a KV tier dropped "
           "one of its blocks.");
  w.sample("tokamak:kv_swap_recomputed_tokens_total", count(g.swap_lost_tokens_total));
  w.family("tokamak:prefix_cache_tier_hits_total", "counter",
           "KV blocks copied back into the pool from a lower tier instead of recomputed.");
  w.sample("tokamak:prefix_cache_tier_hits_total", count(g.tier_host_hits_total),
           {{"tier", "host"}});
  w.sample("tokamak:prefix_cache_tier_hits_total", count(g.tier_disk_hits_total),
           {{"tier", "disk"}});
  w.family("tokamak:prefix_cache_tier_stores_total", "counter",
           "Evicted KV blocks stored in a lower tier.");
  w.sample("tokamak:prefix_cache_tier_stores_total", count(g.tier_host_stores_total),
           {{"tier", "host"}});
  w.sample("tokamak:prefix_cache_tier_stores_total", count(g.tier_disk_stores_total),
           {{"tier", "disk"}});
  w.family("tokamak:prefix_cache_tier_evictions_total", "counter",
           "KV blocks pushed out of a lower tier for room.");
  w.sample("tokamak:prefix_cache_tier_evictions_total", count(g.tier_host_evictions_total),
           {{"tier", "host"}});
  w.sample("tokamak:prefix_cache_tier_evictions_total", count(g.tier_disk_evictions_total),
           {{"tier", "disk"}});
  w.family("tokamak:prefix_cache_tier_bytes", "gauge", "Bytes of KV blocks held by a lower tier.");
  w.sample("tokamak:prefix_cache_tier_bytes", g.tier_host_bytes, {{"tier", "host"}});
  w.sample("tokamak:prefix_cache_tier_bytes", g.tier_disk_bytes, {{"tier", "disk"}});
  w.family("tokamak:prefix_cache_disk_rejected_total", "counter",
           "KV block files removed as corrupt, truncated or another model's.");
  w.sample("tokamak:prefix_cache_disk_rejected_total", count(g.tier_disk_rejected_total));
  w.family("tokamak:kv_window_dropped_tokens_total", "counter",
           "Tokens a sliding KV window (--kv-window) dropped from sequences' caches.");
  w.sample("tokamak:kv_window_dropped_tokens_total", count(g.kv_window_dropped_total));

  std::lock_guard lock(mu_);
  w.family("tokamak:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  w.sample("tokamak:prompt_tokens_total", prompt_tokens_);
  w.family("tokamak:generation_tokens_total", "counter", "Number of generation tokens processed.");
  w.sample("tokamak:generation_tokens_total", generation_tokens_);
  w.family("tokamak:request_success_total", "counter", "Count of successfully processed requests.");
  for (size_t i = 0; i < kReasonLabels.size(); ++i) {
    w.sample("tokamak:request_success_total", finished_[i],
             {{"finished_reason", kReasonLabels[i].second}});
  }
  w.family("tokamak:request_errors_total", "counter",
           "Count of requests answered with an HTTP error, by status code.");
  for (const auto& [status, count] : errors_) {
    w.sample("tokamak:request_errors_total", count, {{"code", std::to_string(status)}});
  }
  w.histogram("tokamak:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              ttft_);
  w.histogram("tokamak:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              inter_token_);
  w.histogram("tokamak:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", time_per_output_token_);
  w.histogram("tokamak:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              e2e_);
  w.histogram("tokamak:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", queue_time_);
  w.histogram("tokamak:request_prompt_tokens", "Number of prefill tokens processed.",
              prompt_tokens_hist_);
  w.histogram("tokamak:request_generation_tokens", "Number of generation tokens processed.",
              generation_tokens_hist_);
  w.histogram("tokamak:iteration_tokens", "Histogram of number of tokens per engine_step.",
              iteration_tokens_);
  return w.take();
}

nlohmann::json ServerMetrics::dashboard(const EngineGauges& g, Clock::time_point now) const {
  return dashboard(g, now, std::chrono::system_clock::now());
}

nlohmann::json ServerMetrics::dashboard(const EngineGauges& g, Clock::time_point now,
                                        std::chrono::system_clock::time_point wall_now) const {
  // Whole seconds only: the second in progress would read as a dip at the right edge.
  const int64_t last = RecentSeries::second_of(now) - 1;
  const int64_t first_point = last - series_points_ + 1;
  const int64_t first = std::min(first_point - (kTrailingSeconds - 1), last - kWindowSeconds + 1);

  std::vector<SecondStats> seconds;
  nlohmann::json totals;
  {
    std::lock_guard lock(mu_);
    series_.set_load(now, g.running, g.waiting);
    seconds = series_.copy(first, last);
    uint64_t errors = 0;
    for (const auto& [status, count] : errors_) errors += count;
    totals = {{"requests", requests_},
              {"prompt_tokens", prompt_tokens_},
              {"generation_tokens", generation_tokens_},
              {"preemptions", g.preemptions_total},
              {"errors", errors}};
  }
  const std::span<const SecondStats> all(seconds);
  const double unix_offset = seconds_since_epoch(wall_now) - seconds_since_epoch(now);
  return {
      {"time", seconds_since_epoch(wall_now)},
      {"model", model_name_},
      {"running", g.running},
      {"waiting", g.waiting},
      {"totals", std::move(totals)},
      {"window", dashboard_window(all.last(static_cast<size_t>(kWindowSeconds)))},
      {"series",
       dashboard_series(all.last(static_cast<size_t>(series_points_ + kTrailingSeconds - 1)),
                        static_cast<size_t>(series_points_), static_cast<size_t>(kTrailingSeconds),
                        unix_offset)},
  };
}

size_t ServerMetrics::series_footprint_bytes() const {
  std::lock_guard lock(mu_);
  return series_.footprint_bytes();
}

}  // namespace tokamak::server
