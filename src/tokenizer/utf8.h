#pragma once
// UTF-8 helpers for the tokenizer: strict validation, repair of invalid input, and the
// lenient reading llama.cpp applies to text before byte-level BPE (so that our token ids for
// malformed input match the reference).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tokamak::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes a sequence starting with `lead` claims, read from its high bits only (continuation
// bytes and invalid leads count as 1). This is how SentencePiece splits text into symbols.
inline size_t claimed_length(uint8_t lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

void append_codepoint(std::string& out, uint32_t cp);  // cp <= 0x10FFFF

// Length of the well-formed sequence (Unicode table 3-7: no overlongs, no surrogates, nothing
// above U+10FFFF) at the start of `s`: 1..4 when complete, 0 when the first bytes can never
// start one, and -n when the n bytes present are the valid beginning of a sequence that
// `s` ends before completing.
int sequence_at(std::string_view s);

bool is_valid(std::string_view s);

// Appends `s` to `out` with every maximal ill-formed subpart replaced by one U+FFFD (the
// Unicode recommended practice). When `final` is false an incomplete sequence at the end is
// left out instead; the return value is the number of bytes of `s` consumed.
size_t append_repaired(std::string& out, std::string_view s, bool final);

// Text as llama.cpp's BPE path reads it, byte for byte:
//   - a lead byte whose continuation bytes are missing or wrong, a stray continuation byte
//     and bytes F8..FF each become U+FFFD, one per byte;
//   - sequences with correct lead/continuation bits are decoded without further checks, so
//     overlong forms come out in their shortest form (C0 80 -> 00) and surrogates are kept;
//   - code points above U+10FFFF (where llama.cpp throws) become U+FFFD, one per byte.
// `for_regex` receives the same text with each surrogate replaced by U+E000 (also three
// bytes, so offsets agree), because PCRE2 accepts only well-formed UTF-8. Both outputs are
// left empty and false returned when `s` is already well-formed (the common case): use `s`.
bool canonicalize_lenient(std::string_view s, std::string& bytes, std::string& for_regex);

}  // namespace tokamak::utf8
