#include "core/stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace tokamak {

double percentile_sorted(std::span<const double> sorted, double p) {
  assert(!sorted.empty());
  assert(p >= 0 && p <= 100);
  assert(std::is_sorted(sorted.begin(), sorted.end()));
  const double rank = p / 100 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

std::optional<double> percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, p);
}

std::optional<Summary> summarize(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  Summary s;
  s.count = values.size();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.count);
  s.min = values.front();
  s.max = values.back();
  s.p50 = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p99 = percentile_sorted(values, 99);
  return s;
}

}  // namespace tokamak
