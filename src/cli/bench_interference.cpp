#include "cli/bench_interference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/bench_client.h"
#include "cli/bench_prompts.h"
#include "cli/bench_report.h"
#include "cli/default_model.h"
#include "cli/loaded_model.h"
#include "core/error.h"

namespace tokamak::cli {
namespace {

struct Prompts {
  std::vector<std::vector<int32_t>> background;
  std::vector<int32_t> long_prompt;
};

// One run's figures, in milliseconds.
struct InterferenceRun {
  EngineOptions opts;
  double long_ttft = 0;                  // also the window: its submission to its first token
  std::optional<Summary> itl_in_window;  // background gaps overlapping the window
  std::optional<Summary> itl_outside;    // the other background gaps
  int32_t finished_early = 0;            // background requests done before the window ended
  int64_t preemptions = 0;
  nlohmann::json engine;
};

void check_config(const InterferenceConfig& c, const EngineOptions& opts) {
  if (c.background < 1) throw Error("--background must be at least 1");
  if (c.background_input_len < 1) throw Error("--background-input-len must be at least 1");
  if (c.background_output_len < 2) throw Error("--background-output-len must be at least 2");
  if (c.long_input_len < 1) throw Error("--long-input-len must be at least 1");
  if (c.engine.no_chunked_prefill) {
    throw Error(
        "bench interference runs with chunked prefill on and then off; drop "
        "--no-chunked-prefill");
  }
  if (opts.max_batched_tokens <= c.background) {
    throw Error(
        fmt::format("--max-batched-tokens ({}) must exceed --background ({}) so that the "
                    "long prompt gets a share of each step",
                    opts.max_batched_tokens, c.background));
  }
  if (opts.max_seqs < c.background + 1) {
    throw Error(fmt::format("--max-seqs ({}) must be at least --background + 1 ({})", opts.max_seqs,
                            c.background + 1));
  }
}

// Exactly `expected` tokens and finish reason "length".
void check_output(const TrackedRequest& r, const char* what, int32_t expected) {
  if (r.finish == FinishReason::Length && r.metrics && r.tokens == expected &&
      r.metrics->output_tokens == expected &&
      r.metrics->token_times.size() == static_cast<size_t>(expected)) {
    return;
  }
  throw Error(fmt::format(
      "{} request (engine id {}) ended with finish reason \"{}\"{} after {} streamed tokens "
      "({} in its metrics); expected exactly {} and \"length\"",
      what, r.id, r.finish ? finish_reason_name(*r.finish) : "none",
      r.error.empty() ? "" : " (" + r.error + ")", r.tokens,
      r.metrics ? r.metrics->output_tokens : -1, expected));
}

InterferenceRun run_once(Model& model, int threads, const Tokenizer& tok, const EngineOptions& opts,
                         const InterferenceConfig& c, const Prompts& prompts) {
  SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;

  Engine engine(model, tok, opts);
  std::fprintf(stderr, "%s", engine_summary(engine.core(), threads).c_str());
  BenchClient client(engine);
  for (const auto& prompt : prompts.background) {
    params.max_tokens = c.background_output_len;
    client.submit({.prompt = prompt, .params = params});
  }
  const auto& requests = client.requests();
  const size_t n_background = prompts.background.size();
  client.wait_until([&] {
    return std::all_of(requests.begin(), requests.begin() + n_background,
                       [](const TrackedRequest& r) { return r.tokens > 0 || r.finished(); });
  });
  params.max_tokens = 1;  // only its prefill interferes; it ends at its first token
  const size_t long_index = client.submit({.prompt = prompts.long_prompt, .params = params});
  client.wait_until([&] { return requests[long_index].finished(); });
  client.wait_until([&] { return client.n_in_flight() == 0; });

  for (size_t i = 0; i < n_background; ++i) {
    check_output(requests[i], "background", c.background_output_len);
  }
  check_output(requests[long_index], "long-prompt", 1);

  const SampleMetrics& long_metrics = *requests[long_index].metrics;
  const Clock::time_point w0 = long_metrics.arrival;
  const Clock::time_point w1 = long_metrics.first_token;
  InterferenceRun run;
  run.opts = opts;
  run.long_ttft = to_ms(w1 - w0);
  std::vector<double> inside, outside;
  for (size_t i = 0; i < n_background; ++i) {
    const SampleMetrics& m = *requests[i].metrics;
    if (m.finished < w1) ++run.finished_early;
    for (size_t k = 1; k < m.token_times.size(); ++k) {
      const Clock::time_point a = m.token_times[k - 1];
      const Clock::time_point b = m.token_times[k];
      (b > w0 && a < w1 ? inside : outside).push_back(to_ms(b - a));
    }
  }
  run.itl_in_window = summarize(std::move(inside));
  run.itl_outside = summarize(std::move(outside));
  run.preemptions = idle_stats(engine).preemptions;
  run.engine = engine_json(engine.core());
  return run;
}

nlohmann::json run_json(const InterferenceRun& r) {
  return {{"engine", r.engine},
          {"long_ttft_ms", r.long_ttft},
          {"background_itl_in_window_ms", to_json(r.itl_in_window)},
          {"background_itl_outside_window_ms", to_json(r.itl_outside)},
          {"background_finished_before_window_end", r.finished_early},
          {"preemptions", r.preemptions}};
}

std::string ms(const std::optional<double>& v) {
  return v ? fmt::format("{:.2f}", *v) : "-";
}

std::string ratio(const std::optional<double>& off, const std::optional<double>& on) {
  return off && on && *on > 0 ? fmt::format("{:.2f}x", *off / *on) : "-";
}

void print_side_by_side(const InterferenceConfig& c, const InterferenceRun& on,
                        const InterferenceRun& off) {
  std::vector<TableRow> rows = {{"", "chunked on", "chunked off", "off / on"}};
  rows.push_back({"max batched tokens", fmt::format("{}", on.opts.max_batched_tokens),
                  fmt::format("{}", off.opts.max_batched_tokens), ""});
  const auto add = [&](const std::string& label, std::optional<double> a, std::optional<double> b) {
    rows.push_back({label, ms(a), ms(b), ratio(b, a)});
  };
  const auto field = [](const std::optional<Summary>& s, double Summary::*f) {
    return s ? std::optional<double>(*s.*f) : std::nullopt;
  };
  add("long prompt TTFT (ms)", on.long_ttft, off.long_ttft);
  add("background ITL in window p50 (ms)", field(on.itl_in_window, &Summary::p50),
      field(off.itl_in_window, &Summary::p50));
  add("background ITL in window p99 (ms)", field(on.itl_in_window, &Summary::p99),
      field(off.itl_in_window, &Summary::p99));
  add("background ITL in window max (ms)", field(on.itl_in_window, &Summary::max),
      field(off.itl_in_window, &Summary::max));
  add("background ITL outside p50 (ms)", field(on.itl_outside, &Summary::p50),
      field(off.itl_outside, &Summary::p50));
  add("background ITL outside p99 (ms)", field(on.itl_outside, &Summary::p99),
      field(off.itl_outside, &Summary::p99));
  const auto count = [](const std::optional<Summary>& s) {
    return fmt::format("{}", s ? s->count : 0);
  };
  rows.push_back({"gaps in window", count(on.itl_in_window), count(off.itl_in_window), ""});
  rows.push_back(
      {"preemptions", fmt::format("{}", on.preemptions), fmt::format("{}", off.preemptions), ""});
  std::printf(
      "\n== tokamak bench interference ==\n"
      "%d background requests (%d prompt + %d output tokens) decoding, then one "
      "%d-token prompt\n\n%s",
      c.background, c.background_input_len, c.background_output_len, c.long_input_len,
      format_table(rows).c_str());
  std::fflush(stdout);
  for (const InterferenceRun* r : {&on, &off}) {
    if (r->finished_early > 0) {
      std::fprintf(stderr,
                   "[bench] warning: with chunked prefill %s, %d background requests finished "
                   "before the long prompt's first token; raise --background-output-len\n",
                   r->opts.chunked_prefill ? "on" : "off", r->finished_early);
    }
  }
}

}  // namespace

void run_interference_bench(const InterferenceConfig& c) {
  const EngineOptions base = c.engine.engine_options();
  check_config(c, base);
  EngineOptions on = base;
  on.chunked_prefill = true;
  EngineOptions off = base;
  off.chunked_prefill = false;
  off.max_batched_tokens = std::max(base.max_batched_tokens, c.long_input_len + c.background);

  const std::string model_path = c.model.empty() ? default_model_path() : c.model;
  LoadedModel loaded = load_model(model_path, c.threads, c.affinity, 0, off.max_batched_tokens);
  tag_model(on, *loaded.file);
  tag_model(off, *loaded.file);
  const Tokenizer& tok = *loaded.tokenizer;
  Prompts prompts;
  const auto vocabulary = prompt_vocabulary(tok);
  Rng rng(c.seed);
  for (int32_t i = 0; i < c.background; ++i) {
    prompts.background.push_back(random_prompt(tok, vocabulary, c.background_input_len, rng));
  }
  prompts.long_prompt = random_prompt(tok, vocabulary, c.long_input_len, rng);

  std::fprintf(stderr, "[bench] run 1 of 2: chunked prefill on\n");
  const InterferenceRun run_on = run_once(*loaded.model, loaded.threads, tok, on, c, prompts);
  std::fprintf(stderr, "[bench] run 2 of 2: chunked prefill off\n");
  const InterferenceRun run_off = run_once(*loaded.model, loaded.threads, tok, off, c, prompts);
  print_side_by_side(c, run_on, run_off);

  if (c.json_path.empty()) return;
  const auto peak_rss = peak_resident_bytes();
  nlohmann::json doc = {
      {"bench", "interference"},
      {"model", model_path},
      {"threads", loaded.threads},
      {"config",
       {{"background", c.background},
        {"background_input_len", c.background_input_len},
        {"background_output_len", c.background_output_len},
        {"long_input_len", c.long_input_len},
        {"seed", c.seed}}},
      {"chunked_on", run_json(run_on)},
      {"chunked_off", run_json(run_off)},
      {"peak_resident_bytes", peak_rss ? nlohmann::json(*peak_rss) : nullptr},
  };
  write_json(c.json_path, doc);
  std::fprintf(stderr, "[bench] wrote %s\n", c.json_path.c_str());
}

}  // namespace tokamak::cli
