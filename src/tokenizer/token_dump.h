#pragma once
// Text listings of token ids, as `tokamak tokenize` prints them.
//
//   default:   one line per token, "id<TAB>'piece'":   15496	'Hello'
//   ids only:  the ids on one line, separated by spaces: 15496 995

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tokamak {

class Tokenizer;

// A token's bytes made printable: well-formed UTF-8 stays as it is except control characters;
// \ and ' are escaped; \n \r \t by name; other bytes (controls, broken sequences) as \xNN.
std::string escape_piece(std::string_view bytes);

std::string format_tokens(const Tokenizer& tok, std::span<const int32_t> ids, bool ids_only);

}  // namespace tokamak
