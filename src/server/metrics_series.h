#pragma once
// The last few minutes of traffic, one slot per second of the steady clock, for the web
// dashboard: tokens per second, TTFT and TPOT values (for percentiles), and the running and
// waiting counts last seen in each second. The slots are a ring sized at construction and
// each keeps at most kMaxValuesPerSecond values per metric (a uniform reservoir sample of
// what arrived in that second), so memory stays bounded however long the server runs.
// Not thread-safe: ServerMetrics guards it.
//
//   slot index = second % seconds_kept            second = floor(steady time in s)
//   [ s-2 | s-1 |  s  | s-N+1 | ... ]             a write to second s' > slot's second
//                  ^ newest                         recycles the slot; older writes are dropped

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <vector>

#include "engine/request.h"

namespace tokamak::server {

// What happened in one second: [second, second + 1) s of the steady clock.
struct SecondStats {
  int64_t second = 0;
  int64_t generation_tokens = 0;
  int64_t prompt_tokens = 0;
  std::vector<double> ttft;  // seconds; at most kMaxValuesPerSecond of them
  std::vector<double> tpot;  // seconds; likewise
  std::optional<int32_t> running;
  std::optional<int32_t> waiting;
};

class RecentSeries {
 public:
  static constexpr size_t kMaxValuesPerSecond = 128;

  // Keeps the newest `seconds_kept` seconds (>= 1).
  explicit RecentSeries(int64_t seconds_kept);

  static int64_t second_of(Clock::time_point t);

  void add_generation_tokens(Clock::time_point t, int64_t n);
  void add_prompt_tokens(Clock::time_point t, int64_t n);
  void add_ttft(Clock::time_point t, double seconds);
  void add_tpot(Clock::time_point t, double seconds);
  void set_load(Clock::time_point t, int32_t running, int32_t waiting);

  // Seconds first..last (inclusive), oldest first; a second with no data, or no longer kept,
  // comes back empty (only `second` set).
  std::vector<SecondStats> copy(int64_t first, int64_t last) const;

  // Bytes held by the slots and their values (capacity), to check that memory is bounded.
  size_t footprint_bytes() const;

 private:
  struct Slot {
    bool used = false;
    SecondStats stats;
    uint64_t ttft_seen = 0;  // values offered this second (the reservoir keeps a sample)
    uint64_t tpot_seen = 0;
  };

  // The slot for `second`, recycled if it held an older one; nullptr when `second` is too
  // old to keep.
  Slot* slot_for(int64_t second);
  void add_value(std::vector<double>& values, uint64_t& seen, double v);

  std::vector<Slot> slots_;  // (seconds_kept)
  std::optional<int64_t> newest_;
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;  // splitmix64 state, for the reservoirs
};

// The p-th percentile (numpy's linear interpolation, like core/stats.h) of values in any
// order, in linear time; reorders `values`. nullopt when empty.
std::optional<double> percentile_unsorted(std::vector<double>& values, double p);

// The dashboard's "window" object over `seconds` (the window's whole seconds, oldest first):
// {"seconds", "ttft_ms": {p50, p90, p99}, "tpot_ms": {...}, "gen_tokens_per_s"}; percentiles
// are null without data.
nlohmann::json dashboard_window(std::span<const SecondStats> seconds);

// The dashboard's "series" array: one point for each of the last `points` entries of
// `seconds`, whose percentiles cover that second and the `trailing - 1` before it (so
// `seconds` holds points + trailing - 1 entries). `unix_offset`: unix seconds minus steady
// seconds, to turn each second into "t".
nlohmann::json dashboard_series(std::span<const SecondStats> seconds, size_t points,
                                size_t trailing, double unix_offset);

}  // namespace tokamak::server
