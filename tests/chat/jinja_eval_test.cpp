// Statements, scoping, expressions and undefined behaviour of the interpreter. Expected
// outputs were produced by Python's jinja2 3.1 with transformers' environment.

#include "tokenizer/chat/jinja_eval.h"

#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace tokamak {
namespace {

using test::render;
using test::render_error;

TEST(JinjaFor, LoopVariables) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
                   "loop.revindex0 }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
            "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}"),
            "-2|1-3|2-|");
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.cycle('o','e') }}{{ loop.depth }}{% endfor %}"),
            "o1e1");
}

TEST(JinjaFor, ElseFilterAndUnpacking) {
  EXPECT_EQ(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ loop.index }}:{{ x }}:{{ loop.length "
                   "}} {% endfor %}"),
            "1:2:2 2:4:2 ");
  EXPECT_EQ(render("{% for k, v in {'a':1,'b':2}.items() %}{{ k }}={{ v }}{% if not loop.last "
                   "%},{% endif %}{% endfor %}"),
            "a=1,b=2");
  EXPECT_EQ(render("{% for (a, b) in [[1, 2]] %}{{ a }}{{ b }}{% endfor %}"), "12");
  EXPECT_EQ(render("{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"), "ba");
  EXPECT_EQ(render("{% for c in 'h\xC3\xA9' %}[{{ c }}]{% endfor %}"), "[h][\xC3\xA9]");
  EXPECT_EQ(render("{% for m in messages|reverse %}{{ m }}{% endfor %}", R"({"messages": [1, 2]})"),
            "21");
}

TEST(JinjaFor, BreakContinueAndNesting) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}"
                   "{% if x == 3 %}{% break %}{% endif %}{% endfor %}"),
            "13");
  EXPECT_EQ(render("{% for x in range(3) %}{% for y in range(2) %}{{ loop.index }}{{ loop.length "
                   "}}{% endfor %}"
                   "{{ loop.index }};{% endfor %}"),
            "12221;12222;12223;");
}

TEST(JinjaScope, ForLoopsScopeAssignmentsIfBlocksDoNot) {
  EXPECT_EQ(render("{% set c = 0 %}{% for x in [1,2,3] %}{{ c }}{% set c = c + 1 %}{{ c }};{% "
                   "endfor %}{{ c }}"),
            "01;01;01;0");
  EXPECT_EQ(
      render("{% set y = 'o' %}{% for x in [1,2] %}{{ y }}{% set y = x %}{% endfor %}{{ y }}"),
      "ooo");
  EXPECT_EQ(render("{% for x in [1,2] %}{% set y = x %}{% endfor %}{{ y }}"), "");
  EXPECT_EQ(render("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");
  EXPECT_EQ(render("{% set i = 'outer' %}{% for i in range(2) %}{{ i }}{% endfor %}{{ i }}"),
            "01outer");
  EXPECT_EQ(render_error("{% for x in [1] %}{{ loop.index }}{% endfor %}{{ loop.index }}"),
            "chat template: 'loop' is undefined at line 1, column 55");
}

TEST(JinjaSet, NamespacesCarryStateOutOfLoops) {
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% for x in [1,2] %}{% set ns.a = ns.a + x %}{% "
                   "endfor %}{{ ns.a }} {{ ns }}"),
            "4 <Namespace {'a': 4}>");
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.index = 0 %}{% for x in 'abc' %}{% set "
                   "ns.index = ns.index + 1 %}"
                   "{% endfor %}{{ ns.index }}"),
            "3");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% set ns.y = 2 %}{{ ns.x }}{{ ns.y }}{{ ns.z }}"),
            "12");
  EXPECT_EQ(render_error("{% set d = {} %}{% set d.x = 1 %}"),
            "chat template: cannot assign attribute on non-namespace object at line 1, column 20");
}

TEST(JinjaSet, TuplesAndBlocks) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = (1,2) %}{{ t }}"), "12 (1, 2)");
  EXPECT_EQ(render("{% set a, b = 'xy' %}{{ b }}{{ a }}"), "yx");
  EXPECT_EQ(render("{% set x %}inner{{ 1 }}{% endset %}[{{ x }}]"), "[inner1]");
  EXPECT_NE(render_error("{% for a, b in [[1,2],[3]] %}{% endfor %}")
                .find("not enough values to unpack (expected 2, got 1)"),
            std::string::npos);
}

TEST(JinjaMacro, DefaultsKeywordsClosureAndRecursion) {
  EXPECT_EQ(render("{% macro m(a, b='x') %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{% set c = 5 %}{{ "
                   "m(1) }}{{ m(2, b='y') }}"),
            "[1x5][2y5]");
  EXPECT_EQ(render("{% macro m(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}"),
            "1|12");
  EXPECT_EQ(render("{% macro m(a=1, b=a) %}{{ b }}{% endmacro %}{{ m() }}"), "1");
  EXPECT_EQ(
      render(
          "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
      "321");
  EXPECT_EQ(render("{% macro g() %}x{% endmacro %}{{ g() ~ g() }} {{ g()|length }}"), "xx 1");
  EXPECT_EQ(render("{% macro m() %}{% set z = 1 %}{{ z }}{% endmacro %}{{ m() }}{{ z }}"), "1");
  EXPECT_NE(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}")
                .find("takes not more than 1 argument"),
            std::string::npos);
  EXPECT_NE(
      render_error("{% macro m(a) %}{% endmacro %}{{ m(z=1) }}").find("no keyword argument 'z'"),
      std::string::npos);
}

TEST(JinjaGeneration, BlockRendersItsBodyInItsOwnScope) {
  // transformers' {% generation %} marks assistant text; rendering is unchanged.
  EXPECT_EQ(render("a{% generation %}gen{{ 1 }}{% endgeneration %}b"), "agen1b");
  EXPECT_EQ(
      render("{% set x = 1 %}{% generation %}{% set x = 2 %}{{ x }}{% endgeneration %}{{ x }}"),
      "21");
}

TEST(JinjaIf, BranchesAndInlineIf) {
  EXPECT_EQ(render("{% if x %}a{% elif y %}b{% else %}c{% endif %}", R"({"y": 1})"), "b");
  EXPECT_EQ(render("{% if x %}a{% elif y %}b{% else %}c{% endif %}"), "c");
  EXPECT_EQ(render("{{ 1 if none else 2 if false else 3 }} {{ 'a' if true }}|{{ 'a' if false }}|"),
            "3 a||");
  EXPECT_EQ(render("{{ not none and 1 or 2 }} {{ 0 or none }} {{ '' and 1 }}|{{ true and 'yes' }}"),
            "1 None |yes");
}

TEST(JinjaExpr, Literals) {
  EXPECT_EQ(render("{{ [1,'a',none,true,1.5,{'k':'v'}] }} {{ ('a',) }} {{ () }} {{ {'a':[1]} }}"),
            "[1, 'a', None, True, 1.5, {'k': 'v'}] ('a',) () {'a': [1]}");
  EXPECT_EQ(
      render(
          "{{ True }} {{ False }} {{ None }} {{ 'a' 'b' }} {{ [1, 2, 3,] }} {{ 1_000 }} {{ 1E2 }}"),
      "True False None ab [1, 2, 3] 1000 100.0");
  EXPECT_EQ(render("{{ \"it's\" }} {{ ['it\\'s', 'a\"b', 'x\\ny'] }}"),
            "it's [\"it's\", 'a\"b', 'x\\ny']");
}

TEST(JinjaExpr, Arithmetic) {
  EXPECT_EQ(render("{{ 10/4 }} {{ 6/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 "
                   "}} {{ 2**-1 }}"),
            "2.5 3.0 3 -4 2 -2 1024 0.5");
  EXPECT_EQ(render("{{ 7 // 2.0 }} {{ -7 % 2.5 }} {{ 2 ** 0.5 }} {{ 0.1+0.2 }} {{ 1/3 }}"),
            "3.0 0.5 1.4142135623730951 0.30000000000000004 0.3333333333333333");
  EXPECT_EQ(render("{{ [1,2] + [3] }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ [0] * 2 }} {{ 'ab' * -1 "
                   "}}|{{ true + 1 }}"),
            "[1, 2, 3] ababab xx [0, 0] |2");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ [1] }} {{ -1|abs }} {{ -(3) }}"),
            "a1NoneTrue1.0[1] 1 -3");
  EXPECT_EQ(render("{{ '%s-%d' % ('a', 2) }} {{ '%r' % 'x' }} {{ '100%%' % () }}"), "a-2 'x' 100%");
  EXPECT_NE(
      render_error("{{ 1 + 'a' }}").find("unsupported operand type(s) for +: 'int' and 'str'"),
      std::string::npos);
  EXPECT_NE(render_error("{{ 1/0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("integer overflow"),
            std::string::npos);
}

TEST(JinjaExpr, FloatsPrintLikePython) {
  EXPECT_EQ(render("{{ 1.0 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 "
                   "}} {{ 100.0 }}"),
            "1.0 1e+20 1e+16 1000000000000000.0 0.0001 1e-05 -0.0 100.0");
  EXPECT_EQ(
      render(
          "{{ 123456789012345678.0 }} {{ 1e-7 }} {{ 3.14159 }} {{ 1e308 * 10 }} {{ -1e308 * 10 }}"),
      "1.2345678901234568e+17 1e-07 3.14159 inf -inf");
}

TEST(JinjaExpr, ComparisonsAndMembership) {
  EXPECT_EQ(render("{{ 3 == 3.0 }} {{ 1 == true }} {{ [1] == [true] }} {{ {'a':1} == {'a':1} }} {{ "
                   "none == 0 }} {{ [] == () }}"),
            "True True True True False False");
  EXPECT_EQ(
      render(
          "{{ 1 < 2 < 3 }} {{ [1, 2] < [1, 3] }} {{ 'a' >= 'a' }} {{ 2 > 1.5 }} {{ 'a' < 'b' }}"),
      "True True True True True");
  EXPECT_EQ(render("{{ 'ab' in 'cabd' }} {{ 1 in [true] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1, "
                   "2] }} {{ 'foo' not in 'food' }}"),
            "True True True True False");
  EXPECT_NE(
      render_error("{{ 1 < 'a' }}").find("'<' not supported between instances of 'int' and 'str'"),
      std::string::npos);
}

TEST(JinjaExpr, AttributesSubscriptsAndSlices) {
  const char* ctx =
      R"({"messages": [{"role": "user", "content": "hello"}, {"role": "a", "content": "x"}]})";
  EXPECT_EQ(render("{{ messages[0]['role'] }} {{ messages[0].content }} {{ messages[-1].content }} "
                   "{{ messages[1:]|length }}",
                   ctx),
            "user hello x 1");
  EXPECT_EQ(render("{{ messages[0].content[:3] }} {{ messages[0]['content'][-3:] }} {{ "
                   "messages[0].content[::-1] }}",
                   ctx),
            "hel llo olleh");
  EXPECT_EQ(render("{{ [1,2,3][1:2] }} {{ 'hello'[-1] }} {{ 'hello'[::2] }} {{ 'hello'[10:] }} {{ "
                   "[1,2,3,4,5][4:0:-2] }}"),
            "[2] o hlo  [5, 3]");
  EXPECT_EQ(render("{{ '\xC3\xA9t\xC3\xA9'[1] }} {{ 'abc'[-5:10] }} {{ [1,2][True] }} {{ a.0 }}",
                   R"({"a": ["z"]})"),
            "t abc 2 z");
  EXPECT_EQ(render("{{ d['x'] }}{{ d.x }}{{ d['items'] }}", R"({"d": {"x": 1, "items": 5}})"),
            "115");
}

TEST(JinjaUndefined, BehavesLikeJinjasDefaultUndefined) {
  // Printing, truthiness, iteration, length, defaults: all quiet.
  EXPECT_EQ(render("[{{ x }}]{% if x %}t{% else %}f{% endif %}{% for i in x %}i{% endfor %}{{ "
                   "x|length }}{{ x|default('d') }}"),
            "[]f0d");
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ x is none }} {{ 'a' in x }} {{ x ~ "
                   "'a' }} {{ x|string }}|{{ x|trim }}"),
            "False True False False a |");
  // A missing key of a defined object is undefined, quietly.
  EXPECT_EQ(render("[{{ d.x }}] {{ d.x|default('z') }} {{ d.x is defined }} {{ m.x }}",
                   R"({"d": {}, "m": {"x": null}})"),
            "[] z False None");
  EXPECT_EQ(render("{{ [1,2,3][5] }}|{{ {'a':1}['b'] }}|{{ none.x }}"), "||");
  // Using an undefined value any other way is an error naming what was undefined.
  EXPECT_EQ(render_error("{{ x.y }}"), "chat template: 'x' is undefined at line 1, column 6");
  EXPECT_EQ(render_error("{{ d.x.y }}", R"({"d": {}})"),
            "chat template: 'dict object' has no attribute 'x' at line 1, column 8");
  EXPECT_EQ(render_error("{{ messages[0]['role'] }}", R"({"messages": []})"),
            "chat template: list object has no element 0 at line 1, column 15");
  EXPECT_EQ(render_error("{{ u + 'a' }}"), "chat template: 'u' is undefined at line 1, column 6");
  EXPECT_EQ(render_error("{{ foo() }}"), "chat template: 'foo' is undefined at line 1, column 7");
  EXPECT_EQ(render_error("{{ x|tojson }}"),
            "chat template: Object of type Undefined is not JSON serializable at line 1, column 5");
}

TEST(JinjaErrors, RuntimeErrorsCarryLocation) {
  EXPECT_EQ(render_error("a\nb {{ 'x'.nothing() }}"),
            "chat template: 'str object' has no attribute 'nothing' at line 2, column 17");
  EXPECT_EQ(render_error("{{ x | foo }}"),
            "chat template: unknown filter 'foo' at line 1, column 6");
  EXPECT_EQ(render_error("{{ x is foo }}"),
            "chat template: unknown test 'foo' at line 1, column 6");
  EXPECT_EQ(render("{% if false %}{{ x | nosuchfilter }}{% endif %}ok"),
            "ok");  // only when reached
  EXPECT_EQ(render_error("{% for x in 3 %}{% endfor %}"),
            "chat template: 'int' object is not iterable at line 1, column 4");
  EXPECT_EQ(render_error("{{ 3|length }}"),
            "chat template: object of type 'int' has no len() at line 1, column 5");
  EXPECT_NE(render_error("{% set x = [1, 2] %}{{ x.append(3) }}")
                .find("access to attribute 'append' of 'list' object is unsafe"),
            std::string::npos);
}

}  // namespace
}  // namespace tokamak
