#pragma once
// Prompts for `tokamak bench`: random token ids of an exact length, or the lines of a file.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/rng.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {

// Token ids a random prompt draws from: normal and byte tokens that are not special and do
// not end generation. Throws Error when the vocabulary has none.
std::vector<int32_t> prompt_vocabulary(const Tokenizer& tok);

// `length` (>= 1) token ids: BOS first when the model adds one, then ids drawn uniformly
// from `vocabulary` (not empty).
std::vector<int32_t> random_prompt(const Tokenizer& tok, std::span<const int32_t> vocabulary,
                                   int32_t length, Rng& rng);

// One prompt per non-empty line, tokenized as `tokamak run` tokenizes a prompt (BOS when the
// model adds one, special-token text not parsed). Throws Error naming the file when it
// cannot be read or holds no prompt.
std::vector<std::vector<int32_t>> read_prompts_file(const std::string& path, const Tokenizer& tok);

}  // namespace tokamak::cli
