#include "tokenizer/utf8.h"

#include <cassert>

namespace tokamak::utf8 {

void append_codepoint(std::string& out, uint32_t cp) {
  assert(cp <= 0x10FFFF);
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int sequence_at(std::string_view s) {
  assert(!s.empty());
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  int length = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int i = 1; i < length; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return -i;
    const uint8_t b = byte(i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
  }
  return length;
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const int n = sequence_at(s.substr(i));
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

namespace {

// Bytes of the maximal ill-formed subpart at the start of `s` (sequence_at(s) == 0): the
// longest prefix that could begin a well-formed sequence, at least one byte.
size_t ill_formed_length(std::string_view s) {
  for (size_t n = s.size() < 4 ? s.size() : 4; n > 1; --n) {
    if (sequence_at(s.substr(0, n - 1)) == -static_cast<int>(n - 1)) return n - 1;
  }
  return 1;
}

}  // namespace

size_t append_repaired(std::string& out, std::string_view s, bool final) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    while (i < s.size() && static_cast<uint8_t>(s[i]) < 0x80) ++i;  // ASCII run
    out.append(s.data() + start, i - start);
    if (i == s.size()) break;
    const std::string_view rest = s.substr(i);
    const int n = sequence_at(rest);
    if (n > 0) {
      out.append(rest.data(), static_cast<size_t>(n));
      i += static_cast<size_t>(n);
    } else if (n < 0) {  // a valid beginning cut off by the end of the input
      if (!final) return i;
      out.append(kReplacement);
      i = s.size();
    } else {
      out.append(kReplacement);
      i += ill_formed_length(rest);
    }
  }
  return s.size();
}

namespace {

// llama.cpp's reading of one sequence: checks only the lead/continuation bit patterns.
// Returns the byte length (0 when invalid) and stores the code point.
size_t read_lenient(std::string_view s, size_t pos, uint32_t& cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[pos + i]); };
  const auto cont = [&](size_t i) { return pos + i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const uint8_t lead = byte(0);
  if (!(lead & 0x80)) {
    cp = lead;
    return 1;
  }
  if (!(lead & 0x40)) return 0;
  if (!(lead & 0x20)) {
    if (!cont(1)) return 0;
    cp = ((lead & 0x1Fu) << 6) | (byte(1) & 0x3Fu);
    return 2;
  }
  if (!(lead & 0x10)) {
    if (!cont(1) || !cont(2)) return 0;
    cp = ((lead & 0x0Fu) << 12) | ((byte(1) & 0x3Fu) << 6) | (byte(2) & 0x3Fu);
    return 3;
  }
  if (!(lead & 0x08)) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    cp = ((lead & 0x07u) << 18) | ((byte(1) & 0x3Fu) << 12) | ((byte(2) & 0x3Fu) << 6) |
         (byte(3) & 0x3Fu);
    return 4;
  }
  return 0;
}

}  // namespace

bool canonicalize_lenient(std::string_view s, std::string& bytes, std::string& for_regex) {
  bytes.clear();
  for_regex.clear();
  if (is_valid(s)) return false;
  bytes.reserve(s.size() + 16);
  for_regex.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = 0;
    const size_t n = read_lenient(s, i, cp);
    if (n == 0) {
      bytes.append(kReplacement);
      for_regex.append(kReplacement);
      i += 1;
    } else if (cp > 0x10FFFF) {
      for (size_t k = 0; k < n; ++k) {
        bytes.append(kReplacement);
        for_regex.append(kReplacement);
      }
      i += n;
    } else if (cp >= 0xD800 && cp <= 0xDFFF) {
      // Kept as its three bytes, like llama.cpp; PCRE2 sees a private-use stand-in.
      bytes.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      bytes.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      bytes.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      append_codepoint(for_regex, 0xE000);
      i += n;
    } else {
      append_codepoint(bytes, cp);
      append_codepoint(for_regex, cp);
      i += n;
    }
  }
  return true;
}

}  // namespace tokamak::utf8
