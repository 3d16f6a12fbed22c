#pragma once
// Splits a template into text and tag tokens the way Jinja2's lexer does under the settings
// Hugging Face transformers uses for chat templates: trim_blocks=True (the first newline after
// a block or comment tag is dropped), lstrip_blocks=True (spaces and tabs before a block or
// comment tag at the start of a line are dropped), keep_trailing_newline=False (one trailing
// newline of the template is dropped), newlines normalised to "\n". Explicit whitespace
// control ({%- -%} {{- -}} {#- -#}, and + to opt out of lstrip/trim) is applied here too, so
// text tokens carry exactly the bytes to emit.
//
//   "Hi {{- name }}!\n{% if x %}\n  y{% endif %}"
//   -> Text("Hi") VarBegin Name(name) VarEnd Text("!\n") BlockBegin Name(if) Name(x)
//      BlockEnd Text("  y") BlockBegin Name(endif) BlockEnd

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak::jinja {

enum class TokenType {
  Text,        // literal template text (already whitespace-controlled)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifier or keyword (if, for, and, true, ...)
  String,      // string literal, escapes decoded
  Integer,
  Float,
  Operator,  // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  End,       // end of template
};

struct Token {
  TokenType type;
  std::string text;  // Text/Name/String/Operator payload
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
  int column = 1;
};

// Throws SyntaxError (unclosed tags, bad characters or escapes) naming line and column.
std::vector<Token> tokenize(std::string_view source);

}  // namespace tokamak::jinja
