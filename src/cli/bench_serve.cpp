#include "cli/bench_serve.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "cli/bench_report.h"
#include "cli/bench_serve_html.h"
#include "cli/bench_serve_http.h"
#include "cli/bench_serve_metrics.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {
namespace {

using nlohmann::json;

// --- flags -----------------------------------------------------------------------------------

template <typename T>
std::optional<T> parse_number(const FlagValues& flags, const std::string& name) {
  const auto it = flags.find(name);
  if (it == flags.end()) return std::nullopt;
  const std::string& text = it->second;
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw Error(fmt::format("--{} {}: expected {}", name, text,
                            std::is_integral_v<T> ? "an integer" : "a number"));
  }
  return value;
}

template <typename T>
std::optional<T> parse_at_least(const FlagValues& flags, const std::string& name, T min) {
  const auto v = parse_number<T>(flags, name);
  if (v && !(*v >= min)) throw Error(fmt::format("--{} must be at least {}", name, min));
  return v;
}

std::string text_flag(const FlagValues& flags, const std::string& name, std::string fallback) {
  const auto it = flags.find(name);
  return it == flags.end() ? std::move(fallback) : it->second;
}

std::vector<int32_t> parse_levels(const std::string& text) {
  std::vector<int32_t> levels;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    int32_t level = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), level);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || level < 1) {
      throw Error("--sweep-concurrency " + text +
                  ": expected positive integers separated by commas, e.g. 1,4,16,32");
    }
    levels.push_back(level);
    start = comma + 1;
  }
  return levels;
}

void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir)) {
    throw Error(fmt::format("--{} {}: the folder {} does not exist", flag, path, dir.string()));
  }
}

// --- requests --------------------------------------------------------------------------------

const char* endpoint_name(ApiEndpoint e) {
  return e == ApiEndpoint::Chat ? "chat" : "completions";
}

std::string endpoint_route(ApiEndpoint e) {
  return e == ApiEndpoint::Chat ? "/v1/chat/completions" : "/v1/completions";
}

// Every request streams with usage, exact lengths (EOS ignored) and greedy sampling.
std::string request_body(ApiEndpoint endpoint, const std::string& model, const BenchPrompt& p) {
  json body = {{"model", model},     {"max_tokens", p.output_len},
               {"ignore_eos", true}, {"temperature", 0},
               {"stream", true},     {"stream_options", {{"include_usage", true}}}};
  if (endpoint == ApiEndpoint::Chat) {
    body["messages"] = p.messages;
  } else {
    if (p.text.empty()) {
      throw Error("the dataset holds chat messages: use --endpoint chat, or give \"prompt\" lines");
    }
    body["prompt"] = p.text;
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string first_model(const ClientOptions& client) {
  HttpReply reply;
  try {
    reply = http_get(client, "/v1/models");
  } catch (const Error& e) {
    throw Error(std::string("cannot list the server's models (--model NAME skips this): ") +
                e.what());
  }
  const std::string where = client.url.origin() + client.url.prefix + "/v1/models";
  if (reply.status != 200) {
    throw Error(
        fmt::format("GET {} answered HTTP {} (--model NAME skips this)", where, reply.status));
  }
  const json doc = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("data") || !doc["data"].is_array() || doc["data"].empty() ||
      !doc["data"][0].is_object() || !doc["data"][0].contains("id") ||
      !doc["data"][0]["id"].is_string()) {
    throw Error(fmt::format("GET {} lists no model id (--model NAME skips this)", where));
  }
  return doc["data"][0]["id"].get<std::string>();
}

std::string dataset_name(const DatasetSpec& d) {
  switch (d.kind) {
    case DatasetKind::Random:
      return "random";
    case DatasetKind::PrefixShared:
      return "prefix-shared";
    case DatasetKind::File:
      return d.path;
  }
  return "?";
}

json settings_json(const ServeBenchConfig& c, const std::string& model, size_t n_prompts,
                   std::optional<int32_t> concurrency) {
  const bool prefix = c.dataset.kind == DatasetKind::PrefixShared;
  const auto opt = [](const auto& v) { return v ? json(*v) : json(); };
  return {{"label", c.label.empty() ? model : c.label},
          {"url", c.url},
          {"endpoint", endpoint_name(c.endpoint)},
          {"model", model},
          {"dataset", dataset_name(c.dataset)},
          {"num_prompts", n_prompts},
          {"input_len", c.dataset.input_len},
          {"output_len", c.dataset.output_len},
          {"range_ratio", c.dataset.range_ratio},
          {"prefix_groups", prefix ? json(c.dataset.prefix_groups) : json()},
          {"prefix_len", prefix ? json(c.dataset.prefix_len) : json()},
          {"request_rate", opt(c.request_rate)},
          {"max_concurrency", opt(concurrency)},
          {"seed", c.dataset.seed},
          {"slo_ttft_ms", opt(c.slo_ttft_ms)},
          {"slo_tpot_ms", opt(c.slo_tpot_ms)},
          {"tokenizer_model", c.tokenizer_model},
          {"warmup", c.warmup}};
}

void warn_about_counts(const RunFigures& f) {
  if (f.usage_missing > 0) {
    std::fprintf(stderr,
                 "[bench] warning: %lld responses carried no usage; their output tokens were "
                 "counted with the tokenizer\n",
                 static_cast<long long>(f.usage_missing));
  }
  if (f.output_len_mismatches > 0) {
    std::fprintf(stderr,
                 "[bench] warning: %lld requests did not generate exactly max_tokens tokens "
                 "(does the server honour ignore_eos?)\n",
                 static_cast<long long>(f.output_len_mismatches));
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot open for writing");
  out << text;
  if (!out) throw Error(path + ": write failed");
}

}  // namespace

ServeBenchConfig serve_config_from_flags(const FlagValues& flags) {
  ServeBenchConfig c;
  c.url = text_flag(flags, "url", c.url);
  parse_url(c.url);  // a bad URL stops here, before any work
  const std::string endpoint = text_flag(flags, "endpoint", "completions");
  if (endpoint == "chat") {
    c.endpoint = ApiEndpoint::Chat;
  } else if (endpoint != "completions") {
    throw Error("--endpoint must be completions or chat, not \"" + endpoint + "\"");
  }
  c.model = text_flag(flags, "model", "");
  const std::string dataset = text_flag(flags, "dataset", "random");
  if (dataset == "prefix-shared") {
    c.dataset.kind = DatasetKind::PrefixShared;
  } else if (dataset != "random") {
    if (!dataset.ends_with(".jsonl")) {
      throw Error("--dataset must be random, prefix-shared or a FILE.jsonl, not \"" + dataset +
                  "\"");
    }
    c.dataset.kind = DatasetKind::File;
    c.dataset.path = dataset;
  }
  c.dataset.num_prompts = parse_at_least<int32_t>(flags, "num-prompts", 1);
  c.dataset.input_len =
      parse_at_least<int32_t>(flags, "input-len", 1).value_or(c.dataset.input_len);
  c.dataset.output_len =
      parse_at_least<int32_t>(flags, "output-len", 1).value_or(c.dataset.output_len);
  c.dataset.range_ratio = parse_at_least<double>(flags, "range-ratio", 0.0).value_or(0.0);
  if (!(c.dataset.range_ratio < 1)) throw Error("--range-ratio must be in [0, 1)");
  c.dataset.prefix_groups =
      parse_at_least<int32_t>(flags, "prefix-groups", 1).value_or(c.dataset.prefix_groups);
  c.dataset.prefix_len =
      parse_at_least<int32_t>(flags, "prefix-len", 1).value_or(c.dataset.prefix_len);
  c.dataset.seed = parse_number<uint64_t>(flags, "seed").value_or(0);
  if (text_flag(flags, "request-rate", "inf") != "inf") {
    c.request_rate = parse_number<double>(flags, "request-rate");
    if (!(*c.request_rate > 0)) throw Error("--request-rate must be positive, or inf");
  }
  c.max_concurrency = parse_at_least<int32_t>(flags, "max-concurrency", 1);
  if (flags.contains("sweep-concurrency")) {
    if (c.max_concurrency) {
      throw Error("--sweep-concurrency sets the concurrency of each run: drop --max-concurrency");
    }
    c.sweep = parse_levels(flags.at("sweep-concurrency"));
  }
  c.slo_ttft_ms = parse_number<double>(flags, "slo-ttft-ms");
  c.slo_tpot_ms = parse_number<double>(flags, "slo-tpot-ms");
  if ((c.slo_ttft_ms && !(*c.slo_ttft_ms > 0)) || (c.slo_tpot_ms && !(*c.slo_tpot_ms > 0))) {
    throw Error("--slo-ttft-ms and --slo-tpot-ms must be positive");
  }
  c.json_path = text_flag(flags, "json", "");
  c.html_path = text_flag(flags, "html", "");
  check_output_path("json", c.json_path);
  check_output_path("html", c.html_path);
  c.tokenizer_model = text_flag(flags, "tokenizer-model", "");
  c.label = text_flag(flags, "label", "");
  c.api_key = text_flag(flags, "api-key", "");
  c.warmup = parse_at_least<int32_t>(flags, "warmup", 0).value_or(0);
  c.timeout_s = parse_number<double>(flags, "timeout").value_or(c.timeout_s);
  if (!(c.timeout_s > 0)) throw Error("--timeout must be positive");
  return c;
}

std::vector<json> serve_bench_runs(const ServeBenchConfig& c, const Tokenizer& tok) {
  ClientOptions client;
  client.url = parse_url(c.url);
  client.api_key = c.api_key;
  client.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s * 1000));
  check_resolvable(client.url);
  const std::string model = c.model.empty() ? first_model(client) : c.model;

  const std::vector<BenchPrompt> prompts = make_dataset(c.dataset, tok);
  LoadPlan plan;
  plan.target = endpoint_route(c.endpoint);
  for (const BenchPrompt& p : prompts) plan.bodies.push_back(request_body(c.endpoint, model, p));
  plan.arrival_s = arrival_times(prompts.size(), c.request_rate, c.dataset.seed);
  const TokenCounter count = [&tok](std::string_view text) {
    return static_cast<int64_t>(tok.encode(text, /*add_special=*/false, false).size());
  };
  std::vector<std::optional<int32_t>> levels(c.sweep.begin(), c.sweep.end());
  if (levels.empty()) levels.push_back(c.max_concurrency);
  std::fprintf(stderr, "[bench] %s%s, model %s: %zu requests (%s, input %d, output %d), rate %s\n",
               client.url.origin().c_str(), endpoint_route(c.endpoint).c_str(), model.c_str(),
               prompts.size(), dataset_name(c.dataset).c_str(), c.dataset.input_len,
               c.dataset.output_len,
               c.request_rate ? fmt::format("{:g} req/s", *c.request_rate).c_str() : "inf");

  if (c.warmup > 0) {
    LoadPlan warm = plan;
    warm.bodies.clear();
    for (int32_t i = 0; i < c.warmup; ++i)
      warm.bodies.push_back(plan.bodies[i % plan.bodies.size()]);
    warm.arrival_s.assign(warm.bodies.size(), 0.0);
    warm.max_concurrency = levels.front();
    const LoadResult result = run_load(client, warm);
    size_t failed = 0;
    for (const RequestRecord& r : result.records) failed += !r.ok();
    std::fprintf(stderr, "[bench] warmup: %d requests, %zu failed\n", c.warmup, failed);
  }

  std::vector<json> runs;
  for (const std::optional<int32_t>& level : levels) {
    plan.max_concurrency = level;
    const LoadResult load = run_load(client, plan);
    const RunFigures figures = run_figures(load, prompts, {c.slo_ttft_ms, c.slo_tpot_ms}, count);
    std::fprintf(stderr,
                 "[bench] max concurrency %s: %lld completed, %lld failed in %.2f s (%.2f req/s, "
                 "%.1f output tokens/s)\n",
                 level ? std::to_string(*level).c_str() : "inf",
                 static_cast<long long>(figures.completed), static_cast<long long>(figures.failed),
                 figures.duration_s, figures.requests_per_s, figures.output_tokens_per_s);
    warn_about_counts(figures);
    runs.push_back(run_json(figures, settings_json(c, model, prompts.size(), level)));
  }
  return runs;
}

json serve_bench_document(const std::vector<json>& runs) {
  return {{"bench", "serve"}, {"version", 1}, {"runs", runs}};
}

bool run_serve_bench(const ServeBenchConfig& config) {
  ServeBenchConfig c = config;
  if (c.tokenizer_model.empty()) c.tokenizer_model = default_model_path();
  const gguf::File file = gguf::File::open(c.tokenizer_model);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(file);

  const std::vector<json> runs = serve_bench_runs(c, *tok);
  bool all_ok = true;
  for (const json& run : runs) all_ok &= run.value("failed", int64_t{0}) == 0;
  if (runs.size() == 1) {
    std::printf("%s", format_run(runs.front()).c_str());
  } else {
    std::printf(
        "\n== tokamak bench serve: %s, one run per max concurrency (latencies in ms) ==\n%s",
        runs.front().value("label", std::string()).c_str(), format_runs_table(runs).c_str());
    for (const json& run : runs) {
      for (const json& e : run["errors"]) {
        std::printf("  concurrency %s: %lld x %s\n",
                    run["settings"]["max_concurrency"].dump().c_str(),
                    static_cast<long long>(e.value("count", int64_t{0})),
                    e.value("message", std::string()).c_str());
      }
    }
  }
  std::fflush(stdout);
  if (!c.json_path.empty()) {
    write_json(c.json_path, serve_bench_document(runs));
    std::fprintf(stderr, "[bench] wrote %s\n", c.json_path.c_str());
  }
  if (!c.html_path.empty()) {
    write_text(c.html_path, html_report(runs));
    std::fprintf(stderr, "[bench] wrote %s\n", c.html_path.c_str());
  }
  return all_ok;
}

void run_bench_report(const std::vector<std::string>& inputs, const std::string& html_path) {
  if (inputs.empty()) throw Error("bench report: give at least one JSON file of bench serve");
  check_output_path("html", html_path);
  std::vector<std::vector<json>> per_file;
  std::map<std::string, std::set<size_t>> files_of_label;
  for (const std::string& path : inputs) {
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open");
    const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || doc.value("bench", std::string()) != "serve" || !doc.contains("runs") ||
        !doc["runs"].is_array()) {
      throw Error(path + ": not a JSON file written by tokamak bench serve --json");
    }
    per_file.emplace_back();
    for (const json& run : doc["runs"]) {
      if (!run.is_object() || !run.contains("settings") || !run["settings"].is_object()) {
        throw Error(path + ": a run without settings");
      }
      files_of_label[run.value("label", std::string())].insert(per_file.size() - 1);
      per_file.back().push_back(run);
    }
  }
  std::vector<json> runs;
  for (size_t f = 0; f < per_file.size(); ++f) {
    for (json run : per_file[f]) {
      const std::string label = run.value("label", std::string());
      if (files_of_label[label].size() > 1) {
        run["label"] = label + " (" + std::filesystem::path(inputs[f]).filename().string() + ")";
      }
      runs.push_back(std::move(run));
    }
  }
  std::printf("%s", format_runs_table(runs).c_str());
  if (!html_path.empty()) {
    write_text(html_path, html_report(runs));
    std::fprintf(stderr, "[bench] wrote %s\n", html_path.c_str());
  }
}

}  // namespace tokamak::cli
