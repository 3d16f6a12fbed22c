#pragma once
// Summaries of measured samples (latencies, inter-token gaps): mean, extremes and
// percentiles, as benchmarks and metrics report them.

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace tokamak {

struct Summary {
  size_t count = 0;  // >= 1
  double mean = 0;
  double min = 0;
  double max = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

// The p-th percentile (p in [0, 100]) of `sorted` (ascending, not empty), interpolating
// linearly between the two nearest ranks, as numpy.percentile does by default (and so the
// figures vLLM's benchmarks print): rank = p / 100 * (n - 1).
double percentile_sorted(std::span<const double> sorted, double p);

// The same for values in any order; nullopt when there are none.
std::optional<double> percentile(std::vector<double> values, double p);

// nullopt when there are no values.
std::optional<Summary> summarize(std::vector<double> values);

}  // namespace tokamak
