// Lexing and whitespace control. Expected outputs were produced by Python's jinja2 3.1
// with transformers' settings (trim_blocks=True, lstrip_blocks=True).

#include "tokenizer/chat/jinja_lexer.h"

#include <gtest/gtest.h>

#include "jinja_test_util.h"
#include "tokenizer/chat/jinja_error.h"

namespace tokamak::jinja {
namespace {

using test::render;
using test::render_error;

TEST(JinjaLexer, SplitsTextAndTags) {
  const auto tokens = tokenize("Hi {{- name }}!\n{% if x %}\n  y{% endif %}");
  std::vector<std::pair<TokenType, std::string>> got;
  for (const Token& t : tokens) got.emplace_back(t.type, t.text);
  const std::vector<std::pair<TokenType, std::string>> want = {
      {TokenType::Text, "Hi"},     {TokenType::VarBegin, "{{"},   {TokenType::Name, "name"},
      {TokenType::VarEnd, "}}"},   {TokenType::Text, "!\n"},      {TokenType::BlockBegin, "{%"},
      {TokenType::Name, "if"},     {TokenType::Name, "x"},        {TokenType::BlockEnd, "%}"},
      {TokenType::Text, "  y"},    {TokenType::BlockBegin, "{%"}, {TokenType::Name, "endif"},
      {TokenType::BlockEnd, "%}"}, {TokenType::End, ""}};
  EXPECT_EQ(got, want);
}

TEST(JinjaLexer, NumbersStringsAndOperators) {
  const auto tokens = tokenize("{{ 1_000 2.5 1e3 'a\\n\\u00e9' \"q\\\"\" // ** != x.0 }}");
  ASSERT_GE(tokens.size(), 12u);
  EXPECT_EQ(tokens[1].type, TokenType::Integer);
  EXPECT_EQ(tokens[1].int_value, 1000);
  EXPECT_EQ(tokens[2].type, TokenType::Float);
  EXPECT_DOUBLE_EQ(tokens[2].float_value, 2.5);
  EXPECT_EQ(tokens[3].type, TokenType::Float);
  EXPECT_DOUBLE_EQ(tokens[3].float_value, 1000.0);
  EXPECT_EQ(tokens[4].text, "a\n\xC3\xA9");
  EXPECT_EQ(tokens[5].text, "q\"");
  EXPECT_EQ(tokens[6].text, "//");
  EXPECT_EQ(tokens[7].text, "**");
  EXPECT_EQ(tokens[8].text, "!=");
  EXPECT_EQ(tokens[10].text, ".");
  EXPECT_EQ(tokens[11].type, TokenType::Integer);  // x.0 is an index, not 0.something
}

TEST(JinjaLexer, TracksLinesAndColumns) {
  const auto tokens = tokenize("a\n  {{ x }}");
  EXPECT_EQ(tokens[1].line, 2);
  EXPECT_EQ(tokens[1].column, 3);
  EXPECT_EQ(tokens[2].line, 2);
  EXPECT_EQ(tokens[2].column, 6);
}

TEST(JinjaWhitespace, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");                  // not after an expression
  EXPECT_EQ(render("{% if true %}  \n{% endif %}"), "  \n");  // only a newline right after
}

TEST(JinjaWhitespace, LstripBlocksDropsIndentBeforeBlockTags) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y {{ 1 }}  {% if true %}z{% endif %}\n"),
            "  x\n  y 1  z");
  EXPECT_EQ(render("\t{% if true %}tabbed{% endif %}"), "tabbed");
  EXPECT_EQ(render("line1\n    {% if true %}\n    inside\n    {% endif %}\nline2\n"),
            "line1\n    inside\nline2");
  EXPECT_EQ(render("text {% if true %}\n{% endif %}more"), "text more");
}

TEST(JinjaWhitespace, ExplicitControl) {
  EXPECT_EQ(render("{%- for x in [1,2,3] -%}\n  {{ x }}\n{%- endfor %}"), "123");
  EXPECT_EQ(render("x\n{%- if true %}\ny\n{% endif -%}\n z"), "xy\nz");
  EXPECT_EQ(render("{{- ' a ' -}}   \n   {{- ' b ' -}}"), " a  b ");
  EXPECT_EQ(render("{% if true -%}   \n\n  x  \n\n   {%- endif %}"), "x");
  EXPECT_EQ(render("{%- set t = 'a' -%}  {{- t -}}  "), "a");
}

TEST(JinjaWhitespace, PlusDisablesLstripAndTrim) {
  EXPECT_EQ(render("{{ 'a' }}\n  {% if true +%}\nq\n{%+ endif %}"), "a\n\nq\n");
  EXPECT_EQ(render("{%+ if true %}\n  r{% endif %}"), "  r");
}

TEST(JinjaWhitespace, Comments) {
  EXPECT_EQ(render("a {#- c -#} b\n{# c #}\nd"), "ab\nd");
  EXPECT_EQ(render("  {# c #}\n  e  {#+ c #}x"), "  e  x");
  EXPECT_EQ(render("{# multi\nline\ncomment #}\nafter"), "after");
}

TEST(JinjaWhitespace, TrailingNewlineAndLineEndings) {
  EXPECT_EQ(render("trailing newline only\n"), "trailing newline only");
  EXPECT_EQ(render("two trailing\n\n"), "two trailing\n");
  EXPECT_EQ(render("a\r\nb\r\n{% if true %}\r\nc\r\n{% endif %}\r\n"), "a\nb\nc\n");
}

TEST(JinjaWhitespace, RawBlocks) {
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(render("  {%- raw -%}  {{ y }}  {%- endraw -%}  z"), "{{ y }}z");
}

TEST(JinjaLexer, BracesInsideExpressionsDoNotCloseTheTag) {
  EXPECT_EQ(render("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");
  EXPECT_EQ(render("{{ '{{ x }}' }}"), "{{ x }}");
}

TEST(JinjaLexer, StringEscapes) {
  EXPECT_EQ(render("{{ '\\u00e9\\x41\\t|' }} {{ '\\q' }} {{ '\\101' }} {{ \"it's\" == 'it\\'s' }}"),
            "\xC3\xA9"
            "A\t| \\q A True");
}

TEST(JinjaLexer, ErrorsNameLineAndColumn) {
  EXPECT_EQ(render_error("ok\n{{ 'unterminated }}"),
            "chat template: unterminated string literal at line 2, column 4");
  EXPECT_EQ(render_error("{# unclosed"),
            "chat template: unclosed comment '{#' at line 1, column 1");
  EXPECT_EQ(render_error("{% set x = 1"), "chat template: unclosed tag '{%' at line 1, column 1");
  EXPECT_EQ(render_error("{{ 1 "), "chat template: unclosed expression '{{' at line 1, column 1");
  EXPECT_EQ(render_error("{{ x @ y }}"),
            "chat template: unexpected character '@' at line 1, column 6");
  EXPECT_EQ(render_error("{{ \"\\x\" }}"),
            "chat template: invalid escape sequence in string literal at line 1, column 5");
  EXPECT_EQ(render_error("{{ 99999999999999999999 }}"),
            "chat template: integer literal too large at line 1, column 4");
  EXPECT_EQ(render_error("{% raw %}abc"),
            "chat template: unclosed '{% raw %}' at line 1, column 1");
  EXPECT_THROW(tokenize("{{ x }"), SyntaxError);
}

}  // namespace
}  // namespace tokamak::jinja
