#include "tokenizer/chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

// Jinja normalises \r\n and \r to \n and drops one trailing newline before lexing.
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_source(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = lex_text_and_tag(pos);
    push(TokenType::End, "", src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t offset) const {
    const auto [line, col] = location(offset);
    throw SyntaxError("chat template: " + what + " at line " + std::to_string(line) + ", column " +
                      std::to_string(col));
  }

  std::pair<int, int> location(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  Token& push(TokenType type, std::string text, size_t offset) {
    const auto [line, col] = location(offset);
    tokens_.push_back(Token{type, std::move(text), 0, 0.0, line, col});
    return tokens_.back();
  }

  // Finds the next "{{", "{%" or "{#" at or after `from`.
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  // Matches `{%[-+]?\s*raw\s*[-+]?%}` (or endraw) at `at`; returns the end offset or npos.
  size_t match_raw_tag(size_t at, std::string_view word, char* left_mod, char* right_mod) const {
    size_t i = at + 2;
    *left_mod = (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ? src_[i++] : 0;
    while (i < src_.size() && is_ascii_space(src_[i])) ++i;
    if (src_.compare(i, word.size(), word) != 0) return std::string::npos;
    i += word.size();
    if (i < src_.size() && is_name_char(src_[i])) return std::string::npos;
    while (i < src_.size() && is_ascii_space(src_[i])) ++i;
    *right_mod = (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ? src_[i++] : 0;
    if (src_.compare(i, 2, "%}") != 0) return std::string::npos;
    return i + 2;
  }

  // Drops trailing whitespace (Python's str.rstrip) from `text`.
  static void rstrip(std::string& text) { text = py::strip(text, std::nullopt, false, true); }

  // Applies the left-side whitespace rules to the text before a tag, then emits it.
  void emit_text_before(std::string text, size_t text_begin, char kind, char modifier) {
    if (modifier == '-') {
      rstrip(text);
    } else if (modifier != '+' && kind != '{') {
      // lstrip_blocks: drop spaces/tabs between the line start and a block/comment tag.
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      const bool line_starting = text_begin == 0 || src_[text_begin - 1] == '\n';
      if (l_pos > 0 || line_starting) {
        const bool only_blanks =
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(),
                        [](char c) { return c == ' ' || c == '\t'; });
        if (only_blanks) text.resize(l_pos);
      }
    }
    if (!text.empty()) push(TokenType::Text, std::move(text), text_begin);
  }

  // After a block/comment end: "-" eats all following whitespace, "+" keeps it, otherwise
  // trim_blocks drops one newline.
  size_t skip_after_tag_end(size_t pos, char modifier, bool trim_blocks) const {
    if (modifier == '-') {
      while (pos < src_.size() && py::is_space(static_cast<unsigned char>(src_[pos]))) ++pos;
    } else if (modifier != '+' && trim_blocks && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t lex_text_and_tag(size_t pos) {
    const size_t tag = find_tag(pos);
    if (tag == std::string::npos) {
      push(TokenType::Text, src_.substr(pos), pos);
      return src_.size();
    }
    const char kind = src_[tag + 1];
    const char modifier = (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+'))
                              ? src_[tag + 2]
                              : 0;
    char raw_left = 0;
    char raw_right = 0;
    const size_t raw_end =
        kind == '%' ? match_raw_tag(tag, "raw", &raw_left, &raw_right) : std::string::npos;
    emit_text_before(src_.substr(pos, tag - pos), pos, kind,
                     raw_end != std::string::npos ? raw_left : modifier);
    if (raw_end != std::string::npos) return lex_raw(tag, raw_end, raw_right);
    if (kind == '#') return lex_comment(tag, modifier);
    return lex_tag(tag, kind, modifier);
  }

  size_t lex_raw(size_t tag, size_t body_begin, char right_mod) {
    if (right_mod == '-') body_begin = skip_after_tag_end(body_begin, '-', false);
    for (size_t i = find_tag(body_begin); i != std::string::npos; i = find_tag(i + 1)) {
      char left = 0;
      char right = 0;
      if (src_[i + 1] != '%') continue;
      const size_t end = match_raw_tag(i, "endraw", &left, &right);
      if (end == std::string::npos) continue;
      std::string body = src_.substr(body_begin, i - body_begin);
      if (left == '-') rstrip(body);
      if (!body.empty()) push(TokenType::Text, std::move(body), body_begin);
      return skip_after_tag_end(end, right, true);
    }
    fail("unclosed '{% raw %}'", tag);
  }

  size_t lex_comment(size_t tag, char modifier) {
    size_t i = tag + 2 + (modifier ? 1 : 0);
    const size_t end = src_.find("#}", i);
    if (end == std::string::npos) fail("unclosed comment '{#'", tag);
    const char close_mod =
        (end > i && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : 0;
    return skip_after_tag_end(end + 2, close_mod, true);
  }

  size_t lex_tag(size_t tag, char kind, char modifier) {
    const bool is_block = kind == '%';
    const std::string_view close = is_block ? "%}" : "}}";
    push(is_block ? TokenType::BlockBegin : TokenType::VarBegin, is_block ? "{%" : "{{", tag);
    size_t i = tag + 2 + (modifier ? 1 : 0);
    brackets_.clear();
    while (true) {
      while (i < src_.size() && is_ascii_space(src_[i])) ++i;
      if (i >= src_.size()) fail(is_block ? "unclosed tag '{%'" : "unclosed expression '{{'", tag);
      // As in Jinja, the end delimiter only counts while brackets are balanced, so
      // `{{ {'a': {'b': 1}} }}` lexes as one dict.
      if (brackets_.empty()) {
        const char c = src_[i];
        char end_mod = 0;
        size_t end = std::string::npos;
        if ((c == '-' || (c == '+' && is_block)) && src_.compare(i + 1, 2, close) == 0) {
          end_mod = c;
          end = i + 3;
        } else if (src_.compare(i, 2, close) == 0) {
          end = i + 2;
        }
        if (end != std::string::npos) {
          push(is_block ? TokenType::BlockEnd : TokenType::VarEnd, std::string(close), i);
          return skip_after_tag_end(end, end_mod, is_block);
        }
      }
      i = lex_expression_token(i);
    }
  }

  void track_bracket(char c, size_t at) {
    if (c == '(' || c == '[' || c == '{') {
      brackets_.push_back(c);
      return;
    }
    const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
    if (brackets_.empty() || brackets_.back() != open)
      fail(std::string("unexpected '") + c + "'", at);
    brackets_.pop_back();
  }

  size_t lex_expression_token(size_t i) {
    const char c = src_[i];
    if (is_digit(c)) return lex_number(i);
    if (is_name_start(c)) {
      size_t j = i + 1;
      while (j < src_.size() && is_name_char(src_[j])) ++j;
      push(TokenType::Name, src_.substr(i, j - i), i);
      return j;
    }
    if (c == '\'' || c == '"') return lex_string(i);
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoChar) {
      if (src_.compare(i, 2, op) == 0) {
        push(TokenType::Operator, std::string(op), i);
        return i + 2;
      }
    }
    static constexpr std::string_view kOneChar = "+-*/%~[](){}<>=.:|,;";
    if (kOneChar.find(c) != std::string_view::npos) {
      if (c == '(' || c == ')' || c == '[' || c == ']' || c == '{' || c == '}') track_bracket(c, i);
      push(TokenType::Operator, std::string(1, c), i);
      return i + 1;
    }
    fail(std::string("unexpected character '") + c + "'", i);
  }

  // Digits with optional "_" separators: \d+(_\d+)*
  size_t scan_digits(size_t i) const {
    while (i < src_.size() && is_digit(src_[i])) {
      ++i;
      if (i + 1 < src_.size() && src_[i] == '_' && is_digit(src_[i + 1])) ++i;
    }
    return i;
  }

  size_t lex_number(size_t i) {
    const bool after_dot = i > 0 && src_[i - 1] == '.';  // `x.0` is attribute access, not 0.x
    size_t j = scan_digits(i);
    bool is_float = false;
    if (!after_dot) {
      if (j + 1 < src_.size() && src_[j] == '.' && is_digit(src_[j + 1])) {
        j = scan_digits(j + 1);
        is_float = true;
      }
      if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
        size_t k = j + 1;
        if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
        if (k < src_.size() && is_digit(src_[k])) {
          j = scan_digits(k);
          is_float = true;
        }
      }
    }
    std::string text;
    for (size_t k = i; k < j; ++k) {
      if (src_[k] != '_') text.push_back(src_[k]);
    }
    Token& tok = push(is_float ? TokenType::Float : TokenType::Integer, text, i);
    errno = 0;
    if (is_float) {
      tok.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      tok.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal too large", i);
    }
    return j;
  }

  size_t lex_string(size_t i) {
    const char quote = src_[i];
    std::string value;
    size_t j = i + 1;
    while (true) {
      if (j >= src_.size()) fail("unterminated string literal", i);
      const char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) fail("unterminated string literal", i);
      j = decode_escape(j, &value);
    }
    push(TokenType::String, std::move(value), i);
    return j + 1;
  }

  // Python's "unicode-escape" for one backslash sequence at `j`; returns the offset after it.
  size_t decode_escape(size_t j, std::string* out) {
    const char e = src_[j + 1];
    auto hex = [&](size_t begin, int digits) -> size_t {
      char32_t code = 0;
      for (int k = 0; k < digits; ++k) {
        const size_t at = begin + static_cast<size_t>(k);
        if (at >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[at]))) {
          fail("invalid escape sequence in string literal", j);
        }
        const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[at])));
        code = code * 16 + static_cast<char32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
      }
      if (code > 0x10FFFF) fail("invalid escape sequence in string literal", j);
      py::append_utf8(*out, code);
      return begin + static_cast<size_t>(digits);
    };
    switch (e) {
      case '\n':
        return j + 2;  // line continuation
      case '\\':
        out->push_back('\\');
        return j + 2;
      case '\'':
        out->push_back('\'');
        return j + 2;
      case '"':
        out->push_back('"');
        return j + 2;
      case 'a':
        out->push_back('\a');
        return j + 2;
      case 'b':
        out->push_back('\b');
        return j + 2;
      case 'f':
        out->push_back('\f');
        return j + 2;
      case 'n':
        out->push_back('\n');
        return j + 2;
      case 'r':
        out->push_back('\r');
        return j + 2;
      case 't':
        out->push_back('\t');
        return j + 2;
      case 'v':
        out->push_back('\v');
        return j + 2;
      case 'x':
        return hex(j + 2, 2);
      case 'u':
        return hex(j + 2, 4);
      case 'U':
        return hex(j + 2, 8);
      case 'N':
        fail("named unicode escapes (\\N{...}) are not supported", j);
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      char32_t code = 0;
      size_t k = j + 1;
      for (int n = 0; n < 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n, ++k) {
        code = code * 8 + static_cast<char32_t>(src_[k] - '0');
      }
      py::append_utf8(*out, code);
      return k;
    }
    out->push_back('\\');  // unknown escapes keep their backslash, as in Python
    return j + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  std::vector<char> brackets_;  // open brackets inside the current tag
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace tokamak::jinja
