#include "cli/bench_prompts.h"

#include <cassert>
#include <fstream>

#include "core/error.h"

namespace tokamak::cli {

std::vector<int32_t> prompt_vocabulary(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const TokenType type = tok.vocab().type(id);
    if (type != TokenType::Normal && type != TokenType::Byte) continue;
    if (tok.is_special(id) || tok.is_end_of_generation(id)) continue;
    ids.push_back(id);
  }
  if (ids.empty()) throw Error("the model's vocabulary has no normal tokens to build prompts from");
  return ids;
}

std::vector<int32_t> random_prompt(const Tokenizer& tok, std::span<const int32_t> vocabulary,
                                   int32_t length, Rng& rng) {
  assert(length >= 1 && !vocabulary.empty());
  std::vector<int32_t> prompt;
  prompt.reserve(static_cast<size_t>(length));
  if (tok.add_bos() && tok.bos_id()) prompt.push_back(*tok.bos_id());
  while (prompt.size() < static_cast<size_t>(length)) {
    // The modulo bias is below 2^-40 for any vocabulary: irrelevant for benchmark prompts.
    prompt.push_back(vocabulary[rng.next() % vocabulary.size()]);
  }
  return prompt;
}

std::vector<std::vector<int32_t>> read_prompts_file(const std::string& path, const Tokenizer& tok) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open prompts file");
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto ids = tok.encode(line, /*add_special=*/true, /*parse_special=*/false);
    if (!ids.empty()) prompts.push_back(std::move(ids));
  }
  if (in.bad()) throw Error(path + ": read error");
  if (prompts.empty()) throw Error(path + ": no prompts (expected one per line)");
  return prompts;
}

}  // namespace tokamak::cli
