#include "cli/bench_serve.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "cli/bench_report.h"
#include "cli/bench_serve_conversation.h"
#include "cli/bench_serve_html.h"
#include "cli/bench_serve_http.h"
#include "cli/bench_serve_metrics.h"
#include "cli/bench_serve_turns.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {
namespace {

using nlohmann::json;

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
    case DatasetKind::MultiTurn:
      return "multiturn";
  }
  return "?";
}

json settings_json(const ServeBenchConfig& c, const std::string& model, size_t n_prompts,
                   std::optional<int32_t> concurrency) {
  const bool prefix = c.dataset.kind == DatasetKind::PrefixShared;
  const bool multiturn = c.dataset.kind == DatasetKind::MultiTurn;
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
          {"conversations", multiturn ? json(c.dataset.conversations) : json()},
          {"turns", multiturn ? json(c.dataset.turns) : json()},
          {"system_len", multiturn ? json(c.dataset.system_len) : json()},
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

void report_level(std::optional<int32_t> level, const RunFigures& figures) {
  std::fprintf(stderr,
               "[bench] max concurrency %s: %lld completed, %lld failed in %.2f s (%.2f req/s, "
               "%.1f output tokens/s)\n",
               level ? std::to_string(*level).c_str() : "inf",
               static_cast<long long>(figures.completed), static_cast<long long>(figures.failed),
               figures.duration_s, figures.requests_per_s, figures.output_tokens_per_s);
  warn_about_counts(figures);
}

// --- multi-turn chat (bench_serve_conversation.h) ---------------------------------------------

// Conversation `c`'s chain: each turn's body made from the replies so far.
ChainPlan conversation_plan(const std::vector<BenchConversation>& convs, const std::string& model,
                            std::vector<double> arrival_s, std::optional<int32_t> level) {
  ChainPlan plan;
  plan.target = endpoint_route(ApiEndpoint::Chat);
  plan.arrival_s = std::move(arrival_s);
  plan.max_concurrency = level;
  plan.next = [&convs, model](size_t c, std::span<const RequestRecord> done) {
    const BenchConversation& conv = convs[c];
    const size_t turn = done.size();
    if (turn == conv.turns()) return std::optional<std::string>();
    std::vector<std::string> replies;
    for (const RequestRecord& r : done) replies.push_back(r.trace.text);
    BenchPrompt p;
    p.messages = turn_messages(conv, turn, replies);
    p.output_len = conv.output_len[turn];
    return std::optional(request_body(ApiEndpoint::Chat, model, p));
  };
  return plan;
}

// One run over every conversation: the usual figures over all turns (conversation by
// conversation, turn by turn), the per-turn table, and each request's turn and conversation.
json multiturn_run(const ServeBenchConfig& c, const ClientOptions& client, const std::string& model,
                   const std::vector<BenchConversation>& convs, std::optional<int32_t> level,
                   const TokenCounter& count) {
  const ChainResult chains = run_chains(
      client,
      conversation_plan(convs, model, arrival_times(convs.size(), c.request_rate, c.dataset.seed),
                        level));
  LoadResult load;
  load.start = chains.start;
  load.end = chains.end;
  load.peak_in_flight = chains.peak_in_flight;
  std::vector<BenchPrompt> expected;  // per request sent: the counts it should have
  json turn_of = json::array(), conversation_of = json::array();
  std::vector<int32_t> turns;
  for (size_t k = 0; k < chains.chains.size(); ++k) {
    for (size_t t = 0; t < chains.chains[k].size(); ++t) {
      load.records.push_back(chains.chains[k][t]);
      BenchPrompt p;
      p.prompt_tokens = turn_content_tokens(convs[k], t);
      p.output_len = convs[k].output_len[t];
      expected.push_back(std::move(p));
      turns.push_back(static_cast<int32_t>(t + 1));
      turn_of.push_back(t + 1);
      conversation_of.push_back(k);
    }
  }
  const RunFigures figures = run_figures(load, expected, {c.slo_ttft_ms, c.slo_tpot_ms}, count);
  report_level(level, figures);
  const size_t planned = convs.size() * static_cast<size_t>(c.dataset.turns);
  if (load.records.size() < planned) {
    std::fprintf(stderr, "[bench] %zu turns not sent: a failed turn ends its conversation\n",
                 planned - load.records.size());
  }
  json settings = settings_json(c, model, planned, level);
  settings["endpoint"] = endpoint_name(ApiEndpoint::Chat);
  json run = run_json(figures, settings);
  run["turns"] = turns_json(turn_figures(figures.requests, turns, c.dataset.turns));
  run["requests"]["turn"] = std::move(turn_of);
  run["requests"]["conversation"] = std::move(conversation_of);
  return run;
}

std::vector<json> multiturn_runs(const ServeBenchConfig& c, const Tokenizer& tok,
                                 const ClientOptions& client, const std::string& model,
                                 const std::vector<std::optional<int32_t>>& levels,
                                 const TokenCounter& count) {
  const std::vector<BenchConversation> convs = make_conversations(c.dataset, tok);
  std::fprintf(
      stderr,
      "[bench] %s%s, model %s: %zu conversations x %d turns (user %d, output %d, "
      "system %d tokens), rate %s\n",
      client.url.origin().c_str(), endpoint_route(ApiEndpoint::Chat).c_str(), model.c_str(),
      convs.size(), c.dataset.turns, c.dataset.input_len, c.dataset.output_len,
      c.dataset.system_len,
      c.request_rate ? fmt::format("{:g} conversations/s", *c.request_rate).c_str() : "inf");
  if (c.warmup > 0) {
    // First turns of other conversations (another seed: another system prompt too), so that
    // the warmup caches no prefix of the measured ones.
    DatasetSpec spec = c.dataset;
    spec.seed = ~spec.seed;
    spec.conversations = c.warmup;
    spec.turns = 1;
    const std::vector<BenchConversation> warm = make_conversations(spec, tok);
    const ChainResult result = run_chains(
        client,
        conversation_plan(warm, model, std::vector<double>(warm.size(), 0.0), levels.front()));
    size_t failed = 0;
    for (const auto& chain : result.chains) failed += chain.empty() || !chain.front().ok();
    std::fprintf(stderr, "[bench] warmup: %d requests, %zu failed\n", c.warmup, failed);
  }
  std::vector<json> runs;
  for (const std::optional<int32_t>& level : levels) {
    runs.push_back(multiturn_run(c, client, model, convs, level, count));
  }
  return runs;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot open for writing");
  out << text;
  if (!out) throw Error(path + ": write failed");
}

}  // namespace

std::vector<json> serve_bench_runs(const ServeBenchConfig& c, const Tokenizer& tok) {
  ClientOptions client;
  client.url = parse_url(c.url);
  client.api_key = c.api_key;
  client.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s * 1000));
  check_resolvable(client.url);
  const std::string model = c.model.empty() ? first_model(client) : c.model;
  const TokenCounter count = [&tok](std::string_view text) {
    return static_cast<int64_t>(tok.encode(text, /*add_special=*/false, false).size());
  };
  std::vector<std::optional<int32_t>> levels(c.sweep.begin(), c.sweep.end());
  if (levels.empty()) levels.push_back(c.max_concurrency);
  if (c.dataset.kind == DatasetKind::MultiTurn) {
    return multiturn_runs(c, tok, client, model, levels, count);
  }

  const std::vector<BenchPrompt> prompts = make_dataset(c.dataset, tok);
  LoadPlan plan;
  plan.target = endpoint_route(c.endpoint);
  for (const BenchPrompt& p : prompts) plan.bodies.push_back(request_body(c.endpoint, model, p));
  plan.arrival_s = arrival_times(prompts.size(), c.request_rate, c.dataset.seed);
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
    report_level(level, figures);
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
    std::printf("%s%s", format_run(runs.front()).c_str(), format_turns(runs.front()).c_str());
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
    for (const json& run : runs) {
      const std::string turns = format_turns(run);
      if (!turns.empty()) {
        std::printf("\n-- max concurrency %s --%s",
                    run["settings"]["max_concurrency"].dump().c_str(), turns.c_str());
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
