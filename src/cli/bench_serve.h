#pragma once
// `tokamak bench serve`: a load generator for any OpenAI-compatible server (tokamak,
// llama.cpp's llama-server, vLLM). It builds a seeded workload (bench_serve_dataset.h), sends
// it as streamed requests at Poisson arrival times under a concurrency cap
// (bench_serve_http.h), and reports throughput, latency percentiles and goodput per run
// (bench_serve_metrics.h), as a table, JSON and a self-contained HTML page
// (bench_serve_html.h). `tokamak bench report` puts saved runs side by side.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_serve_dataset.h"

namespace tokamak {
class Tokenizer;
}

namespace tokamak::cli {

enum class ApiEndpoint { Completions, Chat };

struct ServeBenchConfig {
  std::string url = "http://127.0.0.1:8080";
  ApiEndpoint endpoint = ApiEndpoint::Completions;
  std::string model;  // empty: the first id of GET /v1/models
  DatasetSpec dataset;
  std::optional<double> request_rate;  // requests/s; nullopt = all at once
  std::optional<int32_t> max_concurrency;
  std::vector<int32_t> sweep;  // one run per max concurrency (replaces max_concurrency)
  std::optional<double> slo_ttft_ms;
  std::optional<double> slo_tpot_ms;
  std::string json_path;
  std::string html_path;
  std::string tokenizer_model;  // empty: the default model
  std::string label;            // empty: the model name
  std::string api_key;
  int32_t warmup = 0;  // unmeasured requests sent first
  double timeout_s = 600;
};

// Flag name (without "--") -> the text given. Every value arrives as text and is checked
// here, so that a bad value is one "tokamak: error: ..." line and exit status 1.
using FlagValues = std::map<std::string, std::string>;
ServeBenchConfig serve_config_from_flags(const FlagValues& flags);

// Runs the benchmark against `tok` (the tokenizer that makes the prompts and checks the
// counts), printing progress to stderr. Returns one run object (run_json) per run. Throws
// Error for bad settings or a server whose model list cannot be read when --model is absent;
// failed requests are part of the result.
std::vector<nlohmann::json> serve_bench_runs(const ServeBenchConfig& config, const Tokenizer& tok);

// The whole command: loads the tokenizer, runs, prints the table, writes --json / --html.
// Returns false when some request failed (the report is complete all the same).
bool run_serve_bench(const ServeBenchConfig& config);

// {"bench": "serve", "version": 1, "runs": [...]}: the --json file.
nlohmann::json serve_bench_document(const std::vector<nlohmann::json>& runs);

// `tokamak bench report A.json B.json ... [--html OUT]`: the runs of saved --json files in
// one table (and one HTML page). Labels that repeat across files get the file name added.
// Throws Error for a file that is not a bench serve JSON.
void run_bench_report(const std::vector<std::string>& inputs, const std::string& html_path);

}  // namespace tokamak::cli
