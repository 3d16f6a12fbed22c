#include "server/metrics_histogram.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <utility>

namespace tokamak::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  assert(std::adjacent_find(bounds_.begin(), bounds_.end(), std::greater_equal<>()) ==
         bounds_.end());
  assert(std::all_of(bounds_.begin(), bounds_.end(), [](double b) { return std::isfinite(b); }));
}

void Histogram::observe(double value) {
  // NaN compares false with every bound, so it falls into +Inf, as in prometheus_client.
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  ++counts_[static_cast<size_t>(it - bounds_.begin())];
  ++count_;
  sum_ += value;
}

std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> token_gap_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> request_time_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> iteration_token_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

std::vector<double> one_two_five_buckets(double max) {
  std::vector<double> out;
  for (double scale = 1;; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale > max) return out;
      out.push_back(m * scale);
    }
  }
}

}  // namespace tokamak::server
