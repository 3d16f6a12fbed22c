#include "cli/bench_serve_dataset.h"

#include <fmt/format.h>

#include <cassert>
#include <cmath>
#include <fstream>

#include "cli/bench_prompts.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tokamak::cli {
namespace {

using nlohmann::json;

int32_t count_tokens(const Tokenizer& tok, const std::string& text, bool add_special) {
  return static_cast<int32_t>(tok.encode(text, add_special, /*parse_special=*/true).size());
}

json user_message(std::string text) {
  return json::array({{{"role", "user"}, {"content", std::move(text)}}});
}

std::vector<BenchPrompt> random_dataset(const DatasetSpec& s, const Tokenizer& tok) {
  const auto vocabulary = text_vocabulary(tok);
  const int32_t bos = tok.add_bos() && tok.bos_id() ? 1 : 0;
  Rng rng(s.seed);
  std::vector<BenchPrompt> prompts;
  for (int32_t i = 0; i < s.num_prompts.value_or(kDefaultNumPrompts); ++i) {
    const int32_t input_len = std::max(1, draw_length(s.input_len, s.range_ratio, rng) - bos);
    BenchPrompt p;
    p.output_len = draw_length(s.output_len, s.range_ratio, rng);
    p.text = random_text(tok, vocabulary, input_len, rng);
    p.messages = user_message(p.text);
    p.prompt_tokens = count_tokens(tok, p.text, /*add_special=*/true);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// Request i belongs to group i % G: the groups interleave, as users of several system
// prompts would. Completions see "prefix\nquestion"; chat sees the prefix as the system
// message and the question as the user's.
std::vector<BenchPrompt> prefix_shared_dataset(const DatasetSpec& s, const Tokenizer& tok) {
  const auto vocabulary = text_vocabulary(tok);
  Rng rng(s.seed);
  std::vector<std::string> prefixes;
  for (int32_t g = 0; g < s.prefix_groups; ++g) {
    prefixes.push_back(random_text(tok, vocabulary, s.prefix_len, rng));
  }
  std::vector<BenchPrompt> prompts;
  for (int32_t i = 0; i < s.num_prompts.value_or(kDefaultNumPrompts); ++i) {
    const std::string& prefix = prefixes[static_cast<size_t>(i % s.prefix_groups)];
    const std::string question =
        random_text(tok, vocabulary, draw_length(s.input_len, s.range_ratio, rng), rng);
    BenchPrompt p;
    p.output_len = draw_length(s.output_len, s.range_ratio, rng);
    p.text = prefix + "\n" + question;
    p.messages = json::array(
        {{{"role", "system"}, {"content", prefix}}, {{"role", "user"}, {"content", question}}});
    p.prompt_tokens = count_tokens(tok, p.text, /*add_special=*/true);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// {"prompt": "..."} or {"messages": [{"role", "content"}, ...]}, optionally "output_len".
BenchPrompt file_prompt(const json& line, const std::string& where, const DatasetSpec& s,
                        const Tokenizer& tok, Rng& rng) {
  if (!line.is_object()) throw Error(where + ": expected a JSON object");
  BenchPrompt p;
  if (line.contains("prompt")) {
    if (!line["prompt"].is_string()) throw Error(where + ": \"prompt\" must be a string");
    p.text = line["prompt"].get<std::string>();
    p.messages = user_message(p.text);
    p.prompt_tokens = count_tokens(tok, p.text, /*add_special=*/true);
  } else if (line.contains("messages")) {
    const json& messages = line["messages"];
    if (!messages.is_array() || messages.empty()) {
      throw Error(where + ": \"messages\" must be a non-empty array");
    }
    for (const json& m : messages) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string()) {
        throw Error(where + ": every message needs a string \"role\" and \"content\"");
      }
      p.prompt_tokens += count_tokens(tok, m["content"].get<std::string>(), false);
    }
    p.messages = messages;
  } else {
    throw Error(where + ": expected a \"prompt\" or \"messages\" field");
  }
  if (line.contains("output_len")) {
    const json& n = line["output_len"];
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > INT32_MAX) {
      throw Error(where + ": \"output_len\" must be a positive integer");
    }
    p.output_len = n.get<int32_t>();
  } else {
    p.output_len = draw_length(s.output_len, s.range_ratio, rng);
  }
  return p;
}

std::vector<BenchPrompt> file_dataset(const DatasetSpec& s, const Tokenizer& tok) {
  std::ifstream in(s.path);
  if (!in) throw Error(s.path + ": cannot open the dataset file");
  Rng rng(s.seed);
  std::vector<BenchPrompt> lines;
  std::string text;
  for (int line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", s.path, line_no);
    const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded()) throw Error(where + ": not valid JSON");
    lines.push_back(file_prompt(line, where, s, tok, rng));
  }
  if (in.bad()) throw Error(s.path + ": read error");
  if (lines.empty()) throw Error(s.path + ": no prompts (expected one JSON object per line)");
  if (!s.num_prompts) return lines;
  std::vector<BenchPrompt> prompts;  // the lines in order, repeated when more are asked for
  for (int32_t i = 0; i < *s.num_prompts; ++i) prompts.push_back(lines[i % lines.size()]);
  return prompts;
}

}  // namespace

void check_dataset_spec(const DatasetSpec& s) {
  if (s.num_prompts && *s.num_prompts < 1) throw Error("--num-prompts must be at least 1");
  if (s.input_len < 1) throw Error("--input-len must be at least 1");
  if (s.output_len < 1) throw Error("--output-len must be at least 1");
  if (!(s.range_ratio >= 0 && s.range_ratio < 1)) throw Error("--range-ratio must be in [0, 1)");
  if (s.prefix_groups < 1) throw Error("--prefix-groups must be at least 1");
  if (s.prefix_len < 1) throw Error("--prefix-len must be at least 1");
  if (s.conversations < 1) throw Error("--conversations must be at least 1");
  if (s.turns < 1) throw Error("--turns must be at least 1");
  if (s.system_len < 0) throw Error("--system-len must be at least 0");
  if (s.kind == DatasetKind::File && s.path.empty()) throw Error("no dataset file given");
}

std::vector<BenchPrompt> make_dataset(const DatasetSpec& spec, const Tokenizer& tok) {
  check_dataset_spec(spec);
  switch (spec.kind) {
    case DatasetKind::Random:
      return random_dataset(spec, tok);
    case DatasetKind::PrefixShared:
      return prefix_shared_dataset(spec, tok);
    case DatasetKind::File:
      return file_dataset(spec, tok);
    case DatasetKind::MultiTurn:
      break;
  }
  throw Error("the multiturn dataset is made turn by turn (make_conversations)");
}

int32_t draw_length(int32_t length, double range_ratio, Rng& rng) {
  assert(length >= 1 && range_ratio >= 0 && range_ratio < 1);
  const auto lo = static_cast<int64_t>(std::floor(length * (1 - range_ratio)));
  const auto hi = static_cast<int64_t>(std::floor(length * (1 + range_ratio)));
  const int64_t value = lo + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(hi - lo + 1));
  return static_cast<int32_t>(std::max<int64_t>(1, value));
}

std::vector<int32_t> text_vocabulary(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id : prompt_vocabulary(tok)) {
    const std::string_view piece = tok.piece(id);
    if (!piece.empty() && utf8::is_valid(piece)) ids.push_back(id);
  }
  if (ids.empty()) throw Error("the tokenizer has no text tokens to build prompts from");
  return ids;
}

std::string random_text(const Tokenizer& tok, std::span<const int32_t> vocabulary, int32_t n_tokens,
                        Rng& rng) {
  assert(n_tokens >= 1 && !vocabulary.empty());
  const auto n = static_cast<size_t>(n_tokens);
  auto draw = [&] { return vocabulary[rng.next() % vocabulary.size()]; };
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = draw();
  std::string text;
  // Decoded pieces merge into other tokens when encoded again; cutting or topping up the
  // re-encoded ids converges within a round or two (the cap only bounds pathological cases).
  for (int round = 0; round < 16; ++round) {
    text.clear();
    utf8::append_repaired(text, tok.decode(ids), /*final=*/true);
    std::vector<int32_t> again = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (again.size() == n) break;
    again.resize(std::min(again.size(), n));
    while (again.size() < n) again.push_back(draw());
    ids = std::move(again);
  }
  return text;
}

std::vector<double> arrival_times(size_t n, std::optional<double> rate, uint64_t seed) {
  assert(!rate || *rate > 0);
  std::vector<double> times(n, 0.0);
  if (!rate) return times;
  Rng rng(seed ^ 0xA5A5A5A5A5A5A5A5ULL);  // apart from the prompts' stream
  double t = 0;
  for (size_t i = 1; i < n; ++i) {
    t += -std::log1p(-rng.uniform()) / *rate;  // exponential gap, mean 1 / rate
    times[i] = t;
  }
  return times;
}

}  // namespace tokamak::cli
