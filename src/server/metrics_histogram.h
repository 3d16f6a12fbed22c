#pragma once
// A Prometheus histogram: fixed upper bounds, one count per bucket (non-cumulative inside,
// cumulative when written out), their sum and count. Not thread-safe: ServerMetrics guards it.
// Also the bucket bounds the server uses, the same as vLLM's so that dashboards built for
// vLLM's metrics read ours.

#include <cstdint>
#include <span>
#include <vector>

namespace tokamak::server {

class Histogram {
 public:
  // `bounds`: the buckets' inclusive upper bounds, strictly increasing, finite; the +Inf
  // bucket is implied.
  explicit Histogram(std::vector<double> bounds);

  // One value: it lands in the first bucket whose bound is >= value (Prometheus' `le`).
  void observe(double value);

  std::span<const double> bounds() const { return bounds_; }
  // (bounds().size() + 1): counts per bucket, not cumulative; the last is the +Inf bucket.
  std::span<const uint64_t> bucket_counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// vLLM's buckets (vllm/v1/metrics/loggers.py).
std::vector<double> ttft_buckets();          // time_to_first_token_seconds
std::vector<double> token_gap_buckets();     // inter_token_latency, time per output token
std::vector<double> request_time_buckets();  // e2e latency, queue time
std::vector<double> iteration_token_buckets();
// 1, 2, 5, 10, 20, 50, ... up to `max` (vLLM sizes them to max_model_len; ours go to 1e6,
// since the metrics are built before the model is loaded).
std::vector<double> one_two_five_buckets(double max);

}  // namespace tokamak::server
