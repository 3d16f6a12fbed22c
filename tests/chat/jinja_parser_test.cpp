// Parsing: the syntax tree for the constructs templates use, and clear errors (construct,
// line, column) for what the engine does not support or cannot parse.

#include "tokenizer/chat/jinja_parser.h"

#include <gtest/gtest.h>

#include "jinja_test_util.h"
#include "tokenizer/chat/jinja_error.h"

namespace tokamak::jinja {
namespace {

using test::render_error;

std::string parse_error(const std::string& source) {
  try {
    parse_template(source);
  } catch (const SyntaxError& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaParser, BuildsStatements) {
  const Body body = parse_template(
      "a{{ x }}{% if c %}b{% elif d %}c{% else %}e{% endif %}"
      "{% for k, v in m.items() if v %}{{ k }}{% else %}n{% endfor %}"
      "{% set ns.a = 1 %}{% macro f(p, q=2) %}{% endmacro %}");
  ASSERT_EQ(body.size(), 6u);
  EXPECT_TRUE(std::holds_alternative<TextStmt>(body[0].node));
  EXPECT_TRUE(std::holds_alternative<EmitStmt>(body[1].node));
  const auto& branch = std::get<IfStmt>(body[2].node);
  EXPECT_EQ(branch.branches.size(), 2u);
  EXPECT_EQ(branch.otherwise.size(), 1u);
  const auto& loop = std::get<ForStmt>(body[3].node);
  EXPECT_EQ(loop.targets, (std::vector<std::string>{"k", "v"}));
  EXPECT_NE(loop.filter, nullptr);
  EXPECT_EQ(loop.otherwise.size(), 1u);
  const auto& set = std::get<SetStmt>(body[4].node);
  EXPECT_EQ(set.targets, std::vector<std::string>{"ns"});
  EXPECT_EQ(set.attribute, "a");
  const auto& macro = std::get<MacroStmt>(body[5].node);
  EXPECT_EQ(macro.name, "f");
  ASSERT_EQ(macro.params.size(), 2u);
  EXPECT_EQ(macro.params[0].second, nullptr);
  EXPECT_NE(macro.params[1].second, nullptr);
}

TEST(JinjaParser, OperatorPrecedence) {
  // As in Jinja: `+` binds looser than `~`, which binds looser than `*`; `not` binds looser
  // than comparisons; tests bind tighter than `and`; `**` is left-associative.
  const Body body = parse_template("{{ not a == b }}{{ x is defined and y }}");
  const auto& e0 = std::get<EmitStmt>(body[0].node).expr;
  EXPECT_TRUE(std::holds_alternative<UnaryExpr>(e0->node));
  const auto& e1 = std::get<EmitStmt>(body[1].node).expr;
  ASSERT_TRUE(std::holds_alternative<BinaryExpr>(e1->node));
  EXPECT_EQ(std::get<BinaryExpr>(e1->node).op, BinaryOp::And);
  EXPECT_TRUE(std::holds_alternative<TestExpr>(std::get<BinaryExpr>(e1->node).left->node));
  EXPECT_EQ(
      test::render(
          "{{ 'n' ~ 2 * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 2 + 3 * 4 }} {{ 10 - 2 - 3 }}"),
      "n6 64 4 14 5");
  EXPECT_NE(test::render_error("{{ 'n' ~ 1 + 2 }}")
                .find("unsupported operand type(s) for +: 'str' and 'int'"),
            std::string::npos);
}

TEST(JinjaParser, UnsupportedTagsAreNamed) {
  EXPECT_EQ(parse_error("hello\n{% filter upper %}x{% endfilter %}"),
            "chat template: unsupported tag 'filter' at line 2, column 4");
  EXPECT_EQ(parse_error("line1\nline2 {% include 'x.html' %}"),
            "chat template: unsupported tag 'include' at line 2, column 10");
  EXPECT_EQ(parse_error("{% with %}{% endwith %}"),
            "chat template: unsupported tag 'with' at line 1, column 4");
  EXPECT_EQ(parse_error("{% call foo() %}{% endcall %}"),
            "chat template: unsupported tag 'call' at line 1, column 4");
  EXPECT_EQ(parse_error("{% extends 'base' %}"),
            "chat template: unsupported tag 'extends' at line 1, column 4");
  EXPECT_EQ(parse_error("{% do x %}"), "chat template: unsupported tag 'do' at line 1, column 4");
  EXPECT_EQ(parse_error("{% foo %}"), "chat template: unknown tag 'foo' at line 1, column 4");
  EXPECT_EQ(parse_error("{% for x in y recursive %}{% endfor %}"),
            "chat template: recursive for loops are not supported at line 1, column 15");
  EXPECT_EQ(parse_error("{% set x | upper %}a{% endset %}"),
            "chat template: filtered set blocks are not supported at line 1, column 10");
  EXPECT_EQ(parse_error("{{ f(*args) }}"),
            "chat template: *args and **kwargs in calls are not supported at line 1, column 6");
}

TEST(JinjaParser, StructureErrors) {
  EXPECT_EQ(parse_error("{% if true %}x"),
            "chat template: missing '{% endif %}' before end of template at line 1, column 15");
  EXPECT_EQ(parse_error("{% endif %}"),
            "chat template: unexpected tag 'endif' at line 1, column 4");
  EXPECT_EQ(parse_error("{% for x in [1] %}{% endif %}"),
            "chat template: expected '{% endfor %}', found '{% endif %}' at line 1, column 22");
  EXPECT_EQ(parse_error("{% if true %}{% else %}{% else %}{% endif %}"),
            "chat template: expected '{% endif %}', found '{% else %}' at line 1, column 27");
  EXPECT_EQ(parse_error("{% break %}"),
            "chat template: 'break' outside of a for loop at line 1, column 4");
  EXPECT_EQ(parse_error("{% macro m(a=1, b) %}{% endmacro %}"),
            "chat template: non-default parameter follows default parameter at line 1, column 18");
}

TEST(JinjaParser, ExpressionErrors) {
  EXPECT_EQ(parse_error("{{ }}"),
            "chat template: expected an expression, found '}}' at line 1, column 4");
  EXPECT_EQ(parse_error("{% if %}{% endif %}"),
            "chat template: expected an expression, found '%}' at line 1, column 7");
  EXPECT_EQ(parse_error("{{ 1 + }}"), "chat template: unexpected '}}' at line 1, column 8");
  EXPECT_EQ(parse_error("{{ x | }}"),
            "chat template: expected a name, found '}}' at line 1, column 8");
  EXPECT_EQ(parse_error("{% set %}"),
            "chat template: expected a variable name, found '%}' at line 1, column 8");
  EXPECT_EQ(parse_error("{{ f(a=1, 2) }}"),
            "chat template: positional argument after keyword argument at line 1, column 11");
}

TEST(JinjaParser, RejectsRunawayNesting) {
  const std::string deep = "{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}";
  EXPECT_EQ(parse_error(deep), "chat template: expression nested too deeply at line 1, column 104");
  const std::string fine = "{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}";
  EXPECT_EQ(test::render(fine), "1");
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "{% if true %}";
  EXPECT_NE(parse_error(blocks).find("blocks nested too deeply"), std::string::npos);
}

TEST(JinjaParser, ErrorsAreTokamakErrors) {
  EXPECT_THROW(ChatTemplate::parse("{% filter upper %}{% endfilter %}"), Error);
  EXPECT_EQ(render_error("{% foo %}"), "chat template: unknown tag 'foo' at line 1, column 4");
}

}  // namespace
}  // namespace tokamak::jinja
