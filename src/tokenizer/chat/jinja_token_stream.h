#pragma once
// A cursor over lexer tokens with the checks the parsers share. Internal to the parser.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_lexer.h"

namespace tokamak::jinja {

// Templates nest expressions and blocks only a few levels deep; deeper input is either
// hostile or broken, and recursion on it could exhaust the stack. (Each parenthesis level
// costs two steps of this budget.)
inline constexpr int kMaxNesting = 200;

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& tok = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return tok;
  }

  bool is(TokenType type) const { return current().type == type; }
  bool is_op(std::string_view op) const {
    return current().type == TokenType::Operator && current().text == op;
  }
  bool is_name(std::string_view name) const {
    return current().type == TokenType::Name && current().text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', found " + describe(current()));
  }
  void expect_name(std::string_view name) {
    if (!skip_name(name))
      fail("expected '" + std::string(name) + "', found " + describe(current()));
  }
  const Token& expect(TokenType type, std::string_view what) {
    if (!is(type)) fail("expected " + std::string(what) + ", found " + describe(current()));
    return next();
  }

  [[noreturn]] void fail(const std::string& what) const { fail_at(what, current()); }
  [[noreturn]] static void fail_at(const std::string& what, const Token& at) {
    throw SyntaxError("chat template: " + what + " at line " + std::to_string(at.line) +
                      ", column " + std::to_string(at.column));
  }

  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case TokenType::Text:
        return "text";
      case TokenType::VarBegin:
        return "'{{'";
      case TokenType::VarEnd:
        return "'}}'";
      case TokenType::BlockBegin:
        return "'{%'";
      case TokenType::BlockEnd:
        return "'%}'";
      case TokenType::End:
        return "end of template";
      case TokenType::String:
        return "string literal";
      case TokenType::Integer:
      case TokenType::Float:
        return "number " + tok.text;
      default:
        return "'" + tok.text + "'";
    }
  }

 private:
  std::vector<Token> tokens_;  // ends with an End token
  size_t pos_ = 0;
};

}  // namespace tokamak::jinja
