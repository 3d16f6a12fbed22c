#pragma once
// The HTML report of `tokamak bench serve` / `tokamak bench report`: one self-contained page
// (inline CSS and JS, no network) with a summary table, CDFs of TTFT, TPOT and E2E latency
// (a line per run), and, when a label has runs at several concurrencies, TTFT/TPOT
// (p50 and p99) and throughput against concurrency (a line per label); for multi-turn runs,
// TTFT and prefix-cache hit rate per turn, with their tables. Runs of several servers, told
// apart by their labels, share every chart.

#include <nlohmann/json.hpp>
#include <span>
#include <string>

namespace tokamak::cli {

// `runs`: run objects as run_json() makes them (bench_serve_metrics.h).
std::string html_report(std::span<const nlohmann::json> runs);

// The chart data the page embeds: per run its label, concurrency, headline figures, the
// sorted per-request TTFT / TPOT / E2E values (ms) of its completed requests, and its
// per-turn figures (null for other workloads).
nlohmann::json html_chart_data(std::span<const nlohmann::json> runs);

}  // namespace tokamak::cli
