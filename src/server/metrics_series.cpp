#include "server/metrics_series.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tokamak::server {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Milliseconds to the microsecond, or null.
nlohmann::json ms_or_null(std::optional<double> seconds) {
  if (!seconds) return nullptr;
  return std::round(*seconds * 1e6) / 1e3;
}

nlohmann::json int_or_null(std::optional<int32_t> v) {
  if (!v) return nullptr;
  return *v;
}

}  // namespace

RecentSeries::RecentSeries(int64_t seconds_kept) : slots_(static_cast<size_t>(seconds_kept)) {
  assert(seconds_kept >= 1);
}

int64_t RecentSeries::second_of(Clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

RecentSeries::Slot* RecentSeries::slot_for(int64_t second) {
  const auto n = static_cast<int64_t>(slots_.size());
  if (newest_ && second <= *newest_ - n) return nullptr;
  if (!newest_ || second > *newest_) newest_ = second;
  Slot& slot = slots_[static_cast<size_t>(((second % n) + n) % n)];
  if (slot.used && slot.stats.second == second) return &slot;
  // The slot held a second at least `n` older (or nothing): recycle it, keeping the
  // vectors' capacity (at most kMaxValuesPerSecond each).
  slot.used = true;
  slot.stats.second = second;
  slot.stats.generation_tokens = 0;
  slot.stats.prompt_tokens = 0;
  slot.stats.ttft.clear();
  slot.stats.tpot.clear();
  slot.stats.running.reset();
  slot.stats.waiting.reset();
  slot.ttft_seen = 0;
  slot.tpot_seen = 0;
  return &slot;
}

void RecentSeries::add_value(std::vector<double>& values, uint64_t& seen, double v) {
  ++seen;
  if (values.size() < kMaxValuesPerSecond) {
    values.push_back(v);
    return;
  }
  // Reservoir sampling: each of the `seen` values stays with probability max / seen.
  const uint64_t j = splitmix64(rng_) % seen;
  if (j < kMaxValuesPerSecond) values[j] = v;
}

void RecentSeries::add_generation_tokens(Clock::time_point t, int64_t n) {
  if (Slot* s = slot_for(second_of(t))) s->stats.generation_tokens += n;
}

void RecentSeries::add_prompt_tokens(Clock::time_point t, int64_t n) {
  if (Slot* s = slot_for(second_of(t))) s->stats.prompt_tokens += n;
}

void RecentSeries::add_ttft(Clock::time_point t, double seconds) {
  if (Slot* s = slot_for(second_of(t))) add_value(s->stats.ttft, s->ttft_seen, seconds);
}

void RecentSeries::add_tpot(Clock::time_point t, double seconds) {
  if (Slot* s = slot_for(second_of(t))) add_value(s->stats.tpot, s->tpot_seen, seconds);
}

void RecentSeries::set_load(Clock::time_point t, int32_t running, int32_t waiting) {
  if (Slot* s = slot_for(second_of(t))) {
    s->stats.running = running;
    s->stats.waiting = waiting;
  }
}

std::vector<SecondStats> RecentSeries::copy(int64_t first, int64_t last) const {
  std::vector<SecondStats> out;
  if (last < first) return out;
  out.reserve(static_cast<size_t>(last - first + 1));
  const auto n = static_cast<int64_t>(slots_.size());
  for (int64_t second = first; second <= last; ++second) {
    const Slot& slot = slots_[static_cast<size_t>(((second % n) + n) % n)];
    if (slot.used && slot.stats.second == second) {
      out.push_back(slot.stats);
    } else {
      out.emplace_back().second = second;
    }
  }
  return out;
}

size_t RecentSeries::footprint_bytes() const {
  size_t bytes = sizeof(*this) + slots_.capacity() * sizeof(Slot);
  for (const Slot& slot : slots_) {
    bytes += (slot.stats.ttft.capacity() + slot.stats.tpot.capacity()) * sizeof(double);
  }
  return bytes;
}

std::optional<double> percentile_unsorted(std::vector<double>& values, double p) {
  if (values.empty()) return std::nullopt;
  assert(p >= 0 && p <= 100);
  const double rank = p / 100 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const double frac = rank - static_cast<double>(lo);
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(lo), values.end());
  const double below = values[lo];
  if (frac == 0 || lo + 1 >= values.size()) return below;
  // After nth_element everything past `lo` is >= values[lo]: the next rank is their minimum.
  const double above =
      *std::min_element(values.begin() + static_cast<ptrdiff_t>(lo) + 1, values.end());
  return below + (above - below) * frac;
}

nlohmann::json dashboard_window(std::span<const SecondStats> seconds) {
  std::vector<double> ttft;
  std::vector<double> tpot;
  int64_t tokens = 0;
  for (const SecondStats& s : seconds) {
    ttft.insert(ttft.end(), s.ttft.begin(), s.ttft.end());
    tpot.insert(tpot.end(), s.tpot.begin(), s.tpot.end());
    tokens += s.generation_tokens;
  }
  auto percentiles = [](std::vector<double>& v) {
    return nlohmann::json{{"p50", ms_or_null(percentile_unsorted(v, 50))},
                          {"p90", ms_or_null(percentile_unsorted(v, 90))},
                          {"p99", ms_or_null(percentile_unsorted(v, 99))}};
  };
  const auto n = static_cast<double>(seconds.size());
  return {
      {"seconds", seconds.size()},
      {"ttft_ms", percentiles(ttft)},
      {"tpot_ms", percentiles(tpot)},
      {"gen_tokens_per_s", n > 0 ? std::round(static_cast<double>(tokens) / n * 100) / 100 : 0.0}};
}

nlohmann::json dashboard_series(std::span<const SecondStats> seconds, size_t points,
                                size_t trailing, double unix_offset) {
  assert(trailing >= 1);
  assert(seconds.size() == points + trailing - 1);
  auto out = nlohmann::json::array();
  std::vector<double> ttft;
  std::vector<double> tpot;
  for (size_t i = 0; i < points; ++i) {
    const SecondStats& s = seconds[i + trailing - 1];
    ttft.clear();
    tpot.clear();
    for (const SecondStats& w : seconds.subspan(i, trailing)) {
      ttft.insert(ttft.end(), w.ttft.begin(), w.ttft.end());
      tpot.insert(tpot.end(), w.tpot.begin(), w.tpot.end());
    }
    out.push_back({
        {"t", std::llround(static_cast<double>(s.second) + unix_offset)},
        {"gen_tokens_per_s", static_cast<double>(s.generation_tokens)},
        {"prompt_tokens_per_s", static_cast<double>(s.prompt_tokens)},
        {"ttft_p50_ms", ms_or_null(percentile_unsorted(ttft, 50))},
        {"ttft_p99_ms", ms_or_null(percentile_unsorted(ttft, 99))},
        {"tpot_p50_ms", ms_or_null(percentile_unsorted(tpot, 50))},
        {"tpot_p99_ms", ms_or_null(percentile_unsorted(tpot, 99))},
        {"running", int_or_null(s.running)},
        {"waiting", int_or_null(s.waiting)},
    });
  }
  return out;
}

}  // namespace tokamak::server
