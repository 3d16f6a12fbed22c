#pragma once
// The figures of `tokamak bench serve`, from what the client recorded (bench_serve_http.h),
// defined as vLLM's serving benchmark defines them:
//
//   TTFT  first chunk with text - request sent (connection start)
//   ITL   gaps between consecutive chunks with text (every gap of every request)
//   E2E   end of the response - request sent
//   TPOT  (E2E - TTFT) / (output tokens - 1), for requests with more than one token
//   duration  first possible send -> last response end; RPS and tokens/s over it
//   goodput   completed requests within every SLO given, per second of the duration
//
// Output tokens are the server's usage.completion_tokens, cross-checked by re-tokenizing the
// received text (a mismatch is counted, not corrected); without usage the tokenizer's count
// is used and the request counted under usage_missing. The prefix-cache hit rate is the
// server's usage.prompt_tokens_details.cached_tokens over its prompt tokens, unknown (not 0)
// when the server reports no cached tokens. A run is written as JSON (one
// object per run, with per-request columns for CDFs); the tables are made from that JSON, so
// that saved runs print exactly like fresh ones.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/bench_serve_dataset.h"
#include "cli/bench_serve_http.h"
#include "core/stats.h"

namespace tokamak::cli {

struct Slo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
};

// Tokens of a piece of output text (no BOS/EOS).
using TokenCounter = std::function<int64_t(std::string_view)>;

struct RequestFigures {
  std::optional<std::string> failure;
  double start_ms = 0;                             // when it was sent, from the run's start
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;  // completed requests only (TPOT: > 1 token)
  std::vector<double> itl_ms;
  int64_t prompt_tokens = 0;  // the server's usage, else the dataset's count
  int64_t output_tokens = 0;  // the server's usage, else the tokenizer's count
  bool usage_reported = false;
  int64_t tokenizer_tokens = 0;  // the received text re-tokenized
  // The server's usage.prompt_tokens_details.cached_tokens; nullopt when it sent none.
  std::optional<int64_t> cached_tokens;
};

// Prefix-cache hits of some requests: cached / prompt tokens over the completed requests
// whose server reported cached tokens.
struct CacheHits {
  int64_t reported = 0;       // requests that reported cached tokens
  int64_t cached_tokens = 0;  // their cached tokens
  int64_t prompt_tokens = 0;  // and their prompt tokens

  void add(const RequestFigures& r);
  // nullopt when no request reported cached tokens (unknown, not 0).
  std::optional<double> rate() const;
};

struct ErrorCount {
  std::string message;
  int64_t count = 0;
};

struct RunFigures {
  int64_t completed = 0;
  int64_t failed = 0;
  std::vector<ErrorCount> errors;  // the first kErrorKinds distinct reasons, with counts
  int64_t other_errors = 0;        // failed requests whose reason is not among those
  double duration_s = 0;
  int64_t prompt_tokens = 0;  // of completed requests
  int64_t output_tokens = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;
  std::optional<Summary> ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::optional<int64_t> slo_met;  // with at least one SLO
  std::optional<double> goodput_rps;
  int32_t peak_concurrency = 0;
  int64_t usage_missing = 0;           // completed without usage: tokenizer count used
  int64_t token_count_mismatches = 0;  // usage != the tokenizer's count of the text
  int64_t output_len_mismatches = 0;   // output tokens != the max_tokens asked for
  CacheHits cache_hits;
  std::vector<RequestFigures> requests;
};

inline constexpr size_t kErrorKinds = 5;

RequestFigures request_figures(const RequestRecord& r, BenchClock::time_point run_start,
                               int64_t dataset_prompt_tokens, const TokenCounter& count);

// `prompts` parallel to the load's records (for the expected output lengths and the prompt
// token counts used when the server reports none).
RunFigures run_figures(const LoadResult& load, std::span<const BenchPrompt> prompts, const Slo& slo,
                       const TokenCounter& count);

// One run: {"label", "settings", figures..., "requests": {column arrays}}. `settings` is
// stored as given; it must hold "label" and "max_concurrency" (null = no cap).
nlohmann::json run_json(const RunFigures& figures, const nlohmann::json& settings);

// The detailed text of one run (settings, throughput, latency percentiles, errors).
std::string format_run(const nlohmann::json& run);

// One row per run (a sweep, or runs of several servers), latencies in ms. A "label" column
// when the runs' labels differ, a "rate" column when any run has a finite request rate, a
// "goodput" column when any run has SLOs.
std::string format_runs_table(std::span<const nlohmann::json> runs);

}  // namespace tokamak::cli
