// serve_config_from_flags (bench_serve.h): `tokamak bench serve`'s flags, each arriving as
// text and checked here, so that a bad value is one "tokamak: error: ..." line.

#include <fmt/format.h>

#include <charconv>

#include "cli/bench_report.h"
#include "cli/bench_serve.h"
#include "cli/bench_serve_http.h"
#include "core/error.h"

namespace tokamak::cli {
namespace {

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
  } else if (dataset == "multiturn") {
    // Conversations are chats: the endpoint is chat unless asked otherwise (an error).
    c.dataset.kind = DatasetKind::MultiTurn;
    if (!flags.contains("endpoint")) c.endpoint = ApiEndpoint::Chat;
    if (c.endpoint != ApiEndpoint::Chat) {
      throw Error("--dataset multiturn sends chat histories: use --endpoint chat");
    }
    if (flags.contains("num-prompts")) {
      throw Error(
          "--dataset multiturn sends --conversations x --turns requests: drop --num-prompts");
    }
  } else if (dataset != "random") {
    if (!dataset.ends_with(".jsonl")) {
      throw Error("--dataset must be random, prefix-shared, multiturn or a FILE.jsonl, not \"" +
                  dataset + "\"");
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
  c.dataset.conversations =
      parse_at_least<int32_t>(flags, "conversations", 1).value_or(c.dataset.conversations);
  c.dataset.turns = parse_at_least<int32_t>(flags, "turns", 1).value_or(c.dataset.turns);
  c.dataset.system_len =
      parse_at_least<int32_t>(flags, "system-len", 0).value_or(c.dataset.system_len);
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

}  // namespace tokamak::cli
