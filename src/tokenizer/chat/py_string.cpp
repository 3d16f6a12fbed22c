#include "tokenizer/chat/py_string.h"

#include <locale.h>
#include <wctype.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tokamak::jinja::py {

namespace {

constexpr char32_t kReplacementBase = 0xDC00;  // surrogateescape: byte b -> U+DC00 + b

// Case mapping uses glibc's C.UTF-8 locale (full Unicode simple mappings) when present and
// falls back to ASCII otherwise. The locale object is created once and only read after.
locale_t utf8_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (locale_t loc = utf8_locale())
    return static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc));
  return c;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (locale_t loc = utf8_locale())
    return static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc));
  return c;
}

bool is_cased(char32_t c) {
  return to_upper(c) != c || to_lower(c) != c;
}

bool in_set(char32_t c, const std::u32string& set) {
  return set.find(c) != std::u32string::npos;
}

}  // namespace

void append_utf8(std::string& out, char32_t c) {
  if (c >= kReplacementBase + 0x80 && c <= kReplacementBase + 0xFF) {
    out.push_back(static_cast<char>(c - kReplacementBase));  // an escaped invalid byte
  } else if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = b0 < 0x80           ? 1
              : (b0 >> 5) == 0x6  ? 2
              : (b0 >> 4) == 0xE  ? 3
              : (b0 >> 3) == 0x1E ? 4
                                  : 0;
    char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      c = (c << 6) | (b & 0x3F);
    }
    // Reject overlong forms, surrogates and values past U+10FFFF.
    ok = ok && !(len == 2 && c < 0x80) && !(len == 3 && c < 0x800) && !(len == 4 && c < 0x10000) &&
         !(c >= 0xD800 && c <= 0xDFFF) && c <= 0x10FFFF;
    if (ok) {
      out.push_back(c);
      i += static_cast<size_t>(len);
    } else {
      out.push_back(kReplacementBase + b0);
      ++i;
    }
  }
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return decode(s).size();
  }
  return s.size();
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string text = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t c) { return chars ? in_set(c, set) : is_space(c); };
  size_t begin = 0;
  size_t end = text.size();
  if (left) {
    while (begin < end && strippable(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(text[end - 1])) --end;
  }
  return encode(std::u32string_view(text).substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep) {
    // Runs of whitespace separate; leading and trailing whitespace yield no empty parts.
    const std::u32string text = decode(s);
    std::vector<std::pair<size_t, size_t>> spans;  // [begin, end) of each word
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && is_space(text[i])) ++i;
      if (i >= text.size()) break;
      size_t j = i;
      while (j < text.size() && !is_space(text[j])) ++j;
      spans.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && spans.size() > static_cast<size_t>(maxsplit)) {
      // The unsplit remainder keeps its inner whitespace and the whitespace at its far end
      // (trailing for split, leading for rsplit), as CPython does.
      const size_t keep = static_cast<size_t>(maxsplit);
      auto word = [&](size_t k) {
        return encode(text.substr(spans[k].first, spans[k].second - spans[k].first));
      };
      if (!from_right) {
        for (size_t k = 0; k < keep; ++k) parts.push_back(word(k));
        parts.push_back(encode(text.substr(spans[keep].first)));
      } else {
        const size_t first_kept = spans.size() - keep;
        parts.push_back(encode(text.substr(0, spans[first_kept - 1].second)));
        for (size_t k = first_kept; k < spans.size(); ++k) parts.push_back(word(k));
      }
      return parts;
    }
    for (auto [b, e] : spans) parts.push_back(encode(text.substr(b, e - b)));
    return parts;
  }
  const std::string& d = *sep;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(d, pos);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(pos, hit - pos));
      pos = hit + d.size();
    }
    parts.emplace_back(s.substr(pos));
    return parts;
  }
  size_t end = s.size();
  std::vector<std::string> reversed;
  while (maxsplit < 0 || static_cast<int64_t>(reversed.size()) < maxsplit) {
    if (end < d.size()) break;
    const size_t hit = s.rfind(d, end - d.size());
    if (hit == std::string_view::npos) break;
    reversed.emplace_back(s.substr(hit + d.size(), end - hit - d.size()));
    end = hit;
  }
  reversed.emplace_back(s.substr(0, end));
  return {reversed.rbegin(), reversed.rend()};
}

std::vector<std::string> splitlines(std::string_view s) {
  const std::u32string text = decode(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    const bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                          c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) continue;
    lines.push_back(encode(text.substr(start, i - start)));
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(encode(text.substr(start)));
  return lines;
}

std::string upper(std::string_view s) {
  std::u32string text = decode(s);
  for (char32_t& c : text) c = to_upper(c);
  return encode(text);
}

std::string lower(std::string_view s) {
  std::u32string text = decode(s);
  for (char32_t& c : text) c = to_lower(c);
  return encode(text);
}

std::string capitalize(std::string_view s) {
  std::u32string text = decode(s);
  for (size_t i = 0; i < text.size(); ++i) text[i] = i == 0 ? to_upper(text[i]) : to_lower(text[i]);
  return encode(text);
}

std::string title_method(std::string_view s) {
  std::u32string text = decode(s);
  bool previous_cased = false;
  for (char32_t& c : text) {
    c = previous_cased ? to_lower(c) : to_upper(c);
    previous_cased = is_cased(c);
  }
  return encode(text);
}

std::string title_filter(std::string_view s) {
  // Jinja: "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
  const std::u32string text = decode(s);
  auto is_separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
  };
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const bool sep = is_separator(text[i]);
    size_t j = i;
    while (j < text.size() && is_separator(text[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k) out.push_back(k == i ? to_upper(text[k]) : to_lower(text[k]));
    i = j;
  }
  return encode(out);
}

bool is_upper(std::string_view s) {
  bool any_cased = false;
  for (char32_t c : decode(s)) {
    if (to_upper(c) != c) return false;  // has a lowercase letter
    any_cased = any_cased || is_cased(c);
  }
  return any_cased;
}

bool is_lower(std::string_view s) {
  bool any_cased = false;
  for (char32_t c : decode(s)) {
    if (to_lower(c) != c) return false;
    any_cased = any_cased || is_cased(c);
  }
  return any_cased;
}

std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                    int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    const std::u32string text = decode(s);
    int64_t done = 0;
    for (char32_t c : text) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old_text, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(new_text);
    pos = hit + old_text.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t find(std::string_view s, std::string_view sub, bool from_right) {
  const size_t hit = from_right ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(s.substr(0, hit)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

std::string repr(std::string_view s) {
  const std::u32string text = decode(s);
  const bool has_single = text.find(U'\'') != std::u32string::npos;
  const bool has_double = text.find(U'"') != std::u32string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t c : text) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if ((c >= 0xDC80 && c <= 0xDCFF) || (c >= 0x2000 && c <= 0x200F) ||
               (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 ||
               c == 0xFEFF || c == 0x1680) {
      // Not printable in Python's sense (separators, format characters, escaped bytes).
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form, then laid out with CPython's rule:
  // positional when -4 <= exponent < 16, otherwise d.ddde+XX.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t pos = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    pos = 1;
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
    } else {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out.append(digits, 0, int_len).append(".").append(digits, int_len);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += buf;
  return out;
}

}  // namespace tokamak::jinja::py
