#include "cli/bench_serve_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "cli/bench_report.h"

namespace tokamak::cli {
namespace {

using nlohmann::json;

double ms_between(BenchClock::time_point from, BenchClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

void count_error(RunFigures& run, const std::string& message) {
  for (ErrorCount& e : run.errors) {
    if (e.message == message) {
      ++e.count;
      return;
    }
  }
  if (run.errors.size() < kErrorKinds) {
    run.errors.push_back({message, 1});
  } else {
    ++run.other_errors;  // counts requests of unlisted reasons
  }
}

bool meets(const RequestFigures& r, const Slo& slo) {
  if (slo.ttft_ms && !(*r.ttft_ms <= *slo.ttft_ms)) return false;
  if (slo.tpot_ms && r.tpot_ms && !(*r.tpot_ms <= *slo.tpot_ms)) return false;
  return true;
}

std::string percent(const std::optional<double>& fraction) {
  return fraction ? fmt::format("{:.1f}%", *fraction * 100) : "-";
}

std::string stat(const json& run, const char* metric, const char* which) {
  if (!run.contains(metric) || !run[metric].is_object()) return "-";
  return fixed(number(run[metric], which));
}

std::string concurrency_text(const json& settings) {
  const auto c = number(settings, "max_concurrency");
  return c ? fmt::format("{}", static_cast<int64_t>(*c)) : "inf";
}

std::string rate_text(const json& settings) {
  const auto r = number(settings, "request_rate");
  return r ? fmt::format("{:g}", *r) : "inf";
}

std::string label_of(const json& run) {
  return run.value("label", std::string("?"));
}

}  // namespace

RequestFigures request_figures(const RequestRecord& r, BenchClock::time_point run_start,
                               int64_t dataset_prompt_tokens, const TokenCounter& count) {
  RequestFigures f;
  f.failure = r.failure;
  f.start_ms = ms_between(run_start, r.sent);
  f.prompt_tokens = r.trace.prompt_tokens.value_or(dataset_prompt_tokens);
  f.cached_tokens = r.trace.cached_tokens;
  if (!r.ok()) return f;
  const auto& times = r.trace.content_times;
  assert(!times.empty());  // a completed request carried text
  f.tokenizer_tokens = count(r.trace.text);
  f.usage_reported = r.trace.completion_tokens.has_value();
  f.output_tokens = r.trace.completion_tokens.value_or(f.tokenizer_tokens);
  f.ttft_ms = ms_between(r.sent, times.front());
  f.e2e_ms = ms_between(r.sent, r.ended);
  if (f.output_tokens > 1) {
    f.tpot_ms = (*f.e2e_ms - *f.ttft_ms) / static_cast<double>(f.output_tokens - 1);
  }
  for (size_t k = 1; k < times.size(); ++k) f.itl_ms.push_back(ms_between(times[k - 1], times[k]));
  return f;
}

void CacheHits::add(const RequestFigures& r) {
  if (r.failure || !r.cached_tokens) return;
  ++reported;
  cached_tokens += *r.cached_tokens;
  prompt_tokens += r.prompt_tokens;
}

std::optional<double> CacheHits::rate() const {
  if (reported == 0) return std::nullopt;
  return prompt_tokens > 0 ? static_cast<double>(cached_tokens) / prompt_tokens : 0.0;
}

RunFigures run_figures(const LoadResult& load, std::span<const BenchPrompt> prompts, const Slo& slo,
                       const TokenCounter& count) {
  assert(prompts.size() == load.records.size());
  RunFigures run;
  run.duration_s = ms_between(load.start, load.end) / 1000;
  run.peak_concurrency = load.peak_in_flight;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t slo_met = 0;
  for (size_t i = 0; i < load.records.size(); ++i) {
    RequestFigures f =
        request_figures(load.records[i], load.start, prompts[i].prompt_tokens, count);
    if (f.failure) {
      ++run.failed;
      count_error(run, *f.failure);
      run.requests.push_back(std::move(f));
      continue;
    }
    ++run.completed;
    run.prompt_tokens += f.prompt_tokens;
    run.output_tokens += f.output_tokens;
    if (!f.usage_reported) ++run.usage_missing;
    if (f.usage_reported && f.tokenizer_tokens != f.output_tokens) ++run.token_count_mismatches;
    if (f.output_tokens != prompts[i].output_len) ++run.output_len_mismatches;
    run.cache_hits.add(f);
    ttft.push_back(*f.ttft_ms);
    e2e.push_back(*f.e2e_ms);
    if (f.tpot_ms) tpot.push_back(*f.tpot_ms);
    itl.insert(itl.end(), f.itl_ms.begin(), f.itl_ms.end());
    if (meets(f, slo)) ++slo_met;
    run.requests.push_back(std::move(f));
  }
  if (run.duration_s > 0) {
    run.requests_per_s = static_cast<double>(run.completed) / run.duration_s;
    run.output_tokens_per_s = static_cast<double>(run.output_tokens) / run.duration_s;
    run.total_tokens_per_s =
        static_cast<double>(run.prompt_tokens + run.output_tokens) / run.duration_s;
  }
  run.ttft_ms = summarize(std::move(ttft));
  run.tpot_ms = summarize(std::move(tpot));
  run.itl_ms = summarize(std::move(itl));
  run.e2e_ms = summarize(std::move(e2e));
  if (slo.ttft_ms || slo.tpot_ms) {
    run.slo_met = slo_met;
    run.goodput_rps = run.duration_s > 0 ? static_cast<double>(slo_met) / run.duration_s : 0.0;
  }
  return run;
}

json run_json(const RunFigures& f, const json& settings) {
  json errors = json::array();
  for (const ErrorCount& e : f.errors)
    errors.push_back({{"message", e.message}, {"count", e.count}});
  json ok = json::array(), failure = json::array(), start = json::array(), ttft = json::array(),
       tpot = json::array(), e2e = json::array(), itl = json::array(), prompt = json::array(),
       output = json::array(), cached = json::array();
  for (const RequestFigures& r : f.requests) {
    ok.push_back(!r.failure);
    failure.push_back(r.failure ? json(*r.failure) : json());
    start.push_back(r.start_ms);
    ttft.push_back(nullable(r.ttft_ms));
    tpot.push_back(nullable(r.tpot_ms));
    e2e.push_back(nullable(r.e2e_ms));
    itl.push_back(r.itl_ms);
    prompt.push_back(r.prompt_tokens);
    output.push_back(r.output_tokens);
    cached.push_back(r.cached_tokens ? json(*r.cached_tokens) : json());
  }
  const bool hits_known = f.cache_hits.reported > 0;
  return {{"label", settings.value("label", std::string())},
          {"settings", settings},
          {"completed", f.completed},
          {"failed", f.failed},
          {"errors", std::move(errors)},
          {"other_errors", f.other_errors},
          {"duration_s", f.duration_s},
          {"requests_per_s", f.requests_per_s},
          {"output_tokens_per_s", f.output_tokens_per_s},
          {"total_tokens_per_s", f.total_tokens_per_s},
          {"prompt_tokens", f.prompt_tokens},
          {"output_tokens", f.output_tokens},
          {"peak_concurrency", f.peak_concurrency},
          {"ttft_ms", to_json(f.ttft_ms)},
          {"tpot_ms", to_json(f.tpot_ms)},
          {"itl_ms", to_json(f.itl_ms)},
          {"e2e_ms", to_json(f.e2e_ms)},
          {"slo_met", f.slo_met ? json(*f.slo_met) : json()},
          {"goodput_rps", nullable(f.goodput_rps)},
          {"usage_missing", f.usage_missing},
          {"token_count_mismatches", f.token_count_mismatches},
          {"output_len_mismatches", f.output_len_mismatches},
          {"cached_tokens", hits_known ? json(f.cache_hits.cached_tokens) : json()},
          {"prefix_hit_rate", nullable(f.cache_hits.rate())},
          {"requests",
           {{"ok", std::move(ok)},
            {"failure", std::move(failure)},
            {"start_ms", std::move(start)},
            {"ttft_ms", std::move(ttft)},
            {"tpot_ms", std::move(tpot)},
            {"e2e_ms", std::move(e2e)},
            {"itl_ms", std::move(itl)},
            {"prompt_tokens", std::move(prompt)},
            {"output_tokens", std::move(output)},
            {"cached_tokens", std::move(cached)}}}};
}

std::string format_run(const json& run) {
  const json& s = run["settings"];
  const int64_t completed = run.value("completed", int64_t{0});
  const auto per_request = [&](const char* key) {
    const int64_t total = run.value(key, int64_t{0});
    return fmt::format("{} ({:.1f} per request)", total,
                       completed > 0 ? static_cast<double>(total) / completed : 0.0);
  };
  std::string workload = fmt::format(
      "{}, {} prompts, input {} / output {} tokens", s.value("dataset", std::string("?")),
      s.value("num_prompts", 0), s.value("input_len", 0), s.value("output_len", 0));
  if (const auto r = number(s, "range_ratio"); r && *r > 0) workload += fmt::format(" (±{:g})", *r);
  if (const auto g = number(s, "prefix_groups")) {
    workload += fmt::format(", {} groups sharing a {}-token prefix", *g,
                            number(s, "prefix_len").value_or(0));
  }
  if (const auto turns = number(s, "turns")) {
    workload =
        fmt::format("multiturn, {} conversations x {} turns, user message {} / reply {} tokens",
                    number(s, "conversations").value_or(0), *turns, s.value("input_len", 0),
                    s.value("output_len", 0));
    if (const auto r = number(s, "range_ratio"); r && *r > 0)
      workload += fmt::format(" (±{:g})", *r);
    if (const auto sys = number(s, "system_len"); sys && *sys > 0) {
      workload += fmt::format(", a shared {}-token system prompt", *sys);
    }
  }
  std::vector<TableRow> rows = {
      {"server",
       fmt::format("{} ({}, model {})", s.value("url", std::string("?")),
                   s.value("endpoint", std::string("?")), s.value("model", std::string("?")))},
      {"workload", workload},
      {"request rate", rate_text(s) + " req/s"},
      {"max concurrency", concurrency_text(s)},
      {"completed", fmt::format("{} ({} failed)", completed, run.value("failed", int64_t{0}))},
      {"duration", fixed(number(run, "duration_s"), 3) + " s"},
      {"peak concurrency", fmt::format("{}", run.value("peak_concurrency", 0))},
      {"requests/s", fixed(number(run, "requests_per_s"))},
      {"output tokens/s", fixed(number(run, "output_tokens_per_s"), 1)},
      {"total tokens/s", fixed(number(run, "total_tokens_per_s"), 1)},
      {"prompt tokens", per_request("prompt_tokens")},
      {"output tokens", per_request("output_tokens")},
      {"cached tokens",
       number(run, "prefix_hit_rate")
           ? fmt::format("{} (prefix-cache hit rate {})", run.value("cached_tokens", int64_t{0}),
                         percent(number(run, "prefix_hit_rate")))
           : "- (the server reports no usage.prompt_tokens_details.cached_tokens)"},
  };
  if (const auto g = number(run, "goodput_rps")) {
    std::string slos;
    if (const auto t = number(s, "slo_ttft_ms")) slos += fmt::format("TTFT <= {:g} ms", *t);
    if (const auto t = number(s, "slo_tpot_ms")) {
      slos += fmt::format("{}TPOT <= {:g} ms", slos.empty() ? "" : ", ", *t);
    }
    rows.push_back({"goodput", fmt::format("{:.2f} req/s ({} of {} within {})", *g,
                                           run.value("slo_met", int64_t{0}), completed, slos)});
  }
  rows.push_back({"token counts",
                  fmt::format("usage missing {}, usage != tokenizer {}, output != max_tokens {}",
                              run.value("usage_missing", 0), run.value("token_count_mismatches", 0),
                              run.value("output_len_mismatches", 0))});
  std::vector<TableRow> latency = {{"", "mean", "p50", "p90", "p99"}};
  for (const auto& [name, key] : {std::pair{"TTFT (ms)", "ttft_ms"},
                                  {"TPOT (ms)", "tpot_ms"},
                                  {"ITL (ms)", "itl_ms"},
                                  {"E2E (ms)", "e2e_ms"}}) {
    latency.push_back({name, stat(run, key, "mean"), stat(run, key, "p50"), stat(run, key, "p90"),
                       stat(run, key, "p99")});
  }
  std::string out = fmt::format("\n== tokamak bench serve: {} ==\n{}\n{}", label_of(run),
                                format_table(rows, Align::Left), format_table(latency));
  if (run.contains("errors") && !run["errors"].empty()) {
    out += "\nfailures:\n";
    for (const json& e : run["errors"]) {
      out += fmt::format("  {} x {}\n", e.value("count", 0), e.value("message", std::string()));
    }
    if (const int64_t other = run.value("other_errors", int64_t{0}); other > 0) {
      out += fmt::format("  {} x other reasons\n", other);
    }
  }
  return out;
}

std::string format_runs_table(std::span<const json> runs) {
  bool several_labels = false, any_rate = false, any_goodput = false;
  for (const json& run : runs) {
    several_labels |= label_of(run) != label_of(runs.front());
    any_rate |= number(run["settings"], "request_rate").has_value();
    any_goodput |= number(run, "goodput_rps").has_value();
  }
  TableRow header;
  if (several_labels) header.push_back("label");
  if (any_rate) header.push_back("rate");
  for (const char* h : {"conc", "ok", "fail", "peak", "dur s", "req/s", "out tok/s", "tot tok/s",
                        "TTFT mean", "TTFT p50", "TTFT p99", "TPOT mean", "TPOT p50", "TPOT p99",
                        "ITL p50", "ITL p99", "E2E p50", "E2E p99"}) {
    header.push_back(h);
  }
  if (any_goodput) header.push_back("goodput");
  std::vector<TableRow> rows = {header};
  for (const json& run : runs) {
    const json& s = run["settings"];
    TableRow row;
    if (several_labels) row.push_back(label_of(run));
    if (any_rate) row.push_back(rate_text(s));
    row.push_back(concurrency_text(s));
    row.push_back(fmt::format("{}", run.value("completed", 0)));
    row.push_back(fmt::format("{}", run.value("failed", 0)));
    row.push_back(fmt::format("{}", run.value("peak_concurrency", 0)));
    row.push_back(fixed(number(run, "duration_s")));
    row.push_back(fixed(number(run, "requests_per_s")));
    row.push_back(fixed(number(run, "output_tokens_per_s"), 1));
    row.push_back(fixed(number(run, "total_tokens_per_s"), 1));
    for (const char* key : {"ttft_ms", "tpot_ms"}) {
      for (const char* which : {"mean", "p50", "p99"}) row.push_back(stat(run, key, which));
    }
    for (const char* key : {"itl_ms", "e2e_ms"}) {
      for (const char* which : {"p50", "p99"}) row.push_back(stat(run, key, which));
    }
    if (any_goodput) row.push_back(fixed(number(run, "goodput_rps")));
    rows.push_back(std::move(row));
  }
  return format_table(rows);
}

}  // namespace tokamak::cli
