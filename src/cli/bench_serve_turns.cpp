#include "cli/bench_serve_turns.h"

#include <fmt/format.h>

#include <cassert>

#include "cli/bench_report.h"

namespace tokamak::cli {

using nlohmann::json;

std::vector<TurnFigures> turn_figures(std::span<const RequestFigures> requests,
                                      std::span<const int32_t> turn_of, int32_t n_turns) {
  assert(requests.size() == turn_of.size() && n_turns >= 1);
  std::vector<TurnFigures> turns(static_cast<size_t>(n_turns));
  std::vector<std::vector<double>> ttft(turns.size());
  std::vector<int64_t> prompt_tokens(turns.size(), 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    assert(turn_of[i] >= 1 && turn_of[i] <= n_turns);
    const auto t = static_cast<size_t>(turn_of[i] - 1);
    const RequestFigures& r = requests[i];
    if (r.failure) {
      ++turns[t].failed;
      continue;
    }
    ++turns[t].completed;
    ttft[t].push_back(*r.ttft_ms);
    prompt_tokens[t] += r.prompt_tokens;
    turns[t].cache_hits.add(r);
  }
  for (size_t t = 0; t < turns.size(); ++t) {
    TurnFigures& f = turns[t];
    f.turn = static_cast<int32_t>(t + 1);
    f.ttft_ms = summarize(std::move(ttft[t]));
    if (f.completed > 0) {
      f.prompt_tokens_mean = static_cast<double>(prompt_tokens[t]) / f.completed;
    }
  }
  return turns;
}

json turns_json(std::span<const TurnFigures> turns) {
  json out = json::array();
  for (const TurnFigures& t : turns) {
    const CacheHits& h = t.cache_hits;
    // null when no response reported its cached tokens (a peer without the field)
    const json cached_mean =
        h.reported > 0 ? json(static_cast<double>(h.cached_tokens) / h.reported) : json(nullptr);
    out.push_back({{"turn", t.turn},
                   {"completed", t.completed},
                   {"failed", t.failed},
                   {"ttft_ms", to_json(t.ttft_ms)},
                   {"prompt_tokens_mean", nullable(t.prompt_tokens_mean)},
                   {"cached_tokens_mean", cached_mean},
                   {"prefix_hit_rate", nullable(h.rate())}});
  }
  return out;
}

std::string format_turns(const json& run) {
  if (!run.contains("turns") || !run["turns"].is_array() || run["turns"].empty()) return "";
  std::vector<TableRow> rows = {{"turn", "ok", "failed", "TTFT mean", "TTFT p50", "TTFT p99",
                                 "prompt tok", "cached tok", "hit rate"}};
  for (const json& t : run["turns"]) {
    const json& ttft = t.contains("ttft_ms") ? t["ttft_ms"] : json();
    const auto rate = number(t, "prefix_hit_rate");
    rows.push_back(
        {fmt::format("{}", t.value("turn", 0)), fmt::format("{}", t.value("completed", 0)),
         fmt::format("{}", t.value("failed", 0)), fixed(number(ttft, "mean"), 2),
         fixed(number(ttft, "p50"), 2), fixed(number(ttft, "p99"), 2),
         fixed(number(t, "prompt_tokens_mean"), 1), fixed(number(t, "cached_tokens_mean"), 1),
         rate ? fmt::format("{:.1f}%", *rate * 100) : "-"});
  }
  return fmt::format(
      "\nper turn (TTFT in ms; tokens: means per request; hit rate: the server's cached / "
      "prompt tokens, - when it reports none):\n{}",
      format_table(rows));
}

}  // namespace tokamak::cli
