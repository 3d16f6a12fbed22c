#pragma once
// Per-turn figures of a multi-turn run (`bench serve --dataset multiturn`): for each turn
// index, its requests, TTFT, mean prompt size and the prefix-cache hit rate the server
// reported (cached / prompt tokens), which is what a prefix cache changes as a
// conversation's history grows. Written into the run's JSON as "turns"; the table is made
// from that JSON, so saved runs print like fresh ones.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/bench_serve_metrics.h"
#include "core/stats.h"

namespace tokamak::cli {

struct TurnFigures {
  int32_t turn = 0;  // 1-based
  int64_t completed = 0;
  int64_t failed = 0;
  std::optional<Summary> ttft_ms;            // completed requests
  std::optional<double> prompt_tokens_mean;  // completed requests
  CacheHits cache_hits;
};

// One entry per turn 1..n_turns; `turn_of[i]` (1-based) is the turn of requests[i].
std::vector<TurnFigures> turn_figures(std::span<const RequestFigures> requests,
                                      std::span<const int32_t> turn_of, int32_t n_turns);

// [{"turn", "completed", "failed", "ttft_ms", "prompt_tokens_mean", "cached_tokens_mean",
//   "prefix_hit_rate"}, ...]; the cache figures are null when no request of the turn
// reported cached tokens.
nlohmann::json turns_json(std::span<const TurnFigures> turns);

// The table of run["turns"] (latencies in ms, "-" for unknown), or "" when there is none.
std::string format_turns(const nlohmann::json& run);

}  // namespace tokamak::cli
