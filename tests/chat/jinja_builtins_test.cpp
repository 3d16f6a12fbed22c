// Filters, tests, methods and globals. Expected outputs were produced by Python's jinja2 3.1
// with transformers' environment (its tojson is json.dumps(ensure_ascii=False)).

#include "tokenizer/chat/jinja_builtins.h"

#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace tokamak {
namespace {

using test::render;
using test::render_error;

TEST(JinjaFilters, Strings) {
  EXPECT_EQ(
      render("{{ '  a b '|trim }}|{{ '  a  '|trim('a ') }}|{{ 'abc'|upper }} {{ 'A'|lower }}"),
      "a b||ABC a");
  EXPECT_EQ(render("{{ 'hello-world foo_bar'|title }} {{ 'hELLO wORLD'|capitalize }}"),
            "Hello-World Foo_bar Hello world");
  EXPECT_EQ(
      render(
          "{{ 'x'|replace('x','y') }} {{ 'aaa'|replace('a','b',2) }} {{ 'abc'|replace('', '-') }}"),
      "y bba -a-b-c-");
  EXPECT_EQ(render("{{ 5|string ~ 'a' }} {{ [1]|string }} {{ none|string }} {{ 'abc'|list }}"),
            "5a [1] None ['a', 'b', 'c']");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ "
                   "'a\\n\\nb'|indent(blank=true) }}"),
            "a\n  b\n\n  c|  a\n  b|a\n    \n    b");
  EXPECT_EQ(render("{{ 'x\\n'|indent(first=true) }}|{{ 'a b  c'|wordcount }} {{ 'abc'|center(7) "
                   "}}|{{ 'ab'|center(7) }}|"),
            "    x\n|3   abc  |   ab  |");
  EXPECT_EQ(render("{{ '\xC3\xA9'|upper }} {{ '\xC3\x80\xC3\x89'|lower }} {{ '<a href=\"x\">'|e }} "
                   "{{ 'x'|safe }}"),
            "\xC3\x89 \xC3\xA0\xC3\xA9 &lt;a href=&#34;x&#34;&gt; x");
  EXPECT_EQ(render("{{ '%s %s'|format(1, 'b') }}"), "1 b");
}

TEST(JinjaFilters, Sequences) {
  EXPECT_EQ(render("{{ [1,2,3]|join(',') }} {{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ 'abc'|first "
                   "}} {{ [1,2,3]|count }}"),
            "1,2,3 1 3 a 3");
  EXPECT_EQ(render("{{ {'a':1}|length }} {{ 'h\xC3\xA9llo'|length }} {{ []|first }}|{{ "
                   "[1,2]|reverse|list }} {{ 'abc'|reverse }}"),
            "1 5 |[2, 1] cba");
  EXPECT_EQ(render("{{ [3,1,2]|sort }} {{ ['b','A','a']|sort }} {{ "
                   "['b','a','C']|sort(case_sensitive=true) }} {{ [3,2]|sort(reverse=true) }}"),
            "[1, 2, 3] ['A', 'a', 'b'] ['C', 'a', 'b'] [3, 2]");
  EXPECT_EQ(render("{{ [{'n':2},{'n':1}]|sort(attribute='n') }} {{ "
                   "[['b',2],['a',1]]|sort(attribute='0') }}"),
            "[{'n': 1}, {'n': 2}] [['a', 1], ['b', 2]]");
  EXPECT_EQ(
      render(
          "{{ [1,2,2,'a','A']|unique|list }} {{ ['a','A','b']|unique(case_sensitive=true)|list }}"),
      "[1, 2, 'a'] ['a', 'A', 'b']");
  EXPECT_EQ(render("{{ [1, 2]|sum }} {{ [1, 2, 3]|sum(start=10) }} {{ [{'a': 1}, {'a': "
                   "2}]|sum(attribute='a') }}"),
            "3 16 3");
  EXPECT_EQ(render("{{ [1, 3, 2]|max }} {{ ['b','A']|min }} {{ {'b':1,'a':2}|dictsort }} {{ {'b': "
                   "2, 'a': 1}|dictsort(by='value', reverse=true) }}"),
            "3 A [('a', 2), ('b', 1)] [('b', 2), ('a', 1)]");
  EXPECT_EQ(render("{{ {'a':1}|items|list }} {{ x|items|list }} {% for k, v in d|items %}{{ k }}{{ "
                   "v }}{% endfor %}",
                   R"({"d": {"z": 1, "a": 2}})"),
            "[('a', 1)] [] z1a2");
}

TEST(JinjaFilters, SelectMapAndFriends) {
  const char* ctx =
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})";
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', "
                   "'user')|map(attribute='content')|join(', ') }}",
                   ctx),
            "a, c");
  EXPECT_EQ(render("{{ messages|rejectattr('role', 'in', ['user'])|list|length }}", ctx), "1");
  EXPECT_EQ(render("{{ messages|selectattr('x', 'undefined')|list|length }} {{ "
                   "messages|selectattr('role')|list|length }}",
                   ctx),
            "3 3");
  EXPECT_EQ(render("{{ [1, 2, 3]|select('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 2, "
                   "3]|reject('gt', 1)|list }}"),
            "[1, 3] [1, 'a'] [1]");
  EXPECT_EQ(render("{{ [{'a':1},{'a':2},{'b':3}]|map(attribute='a')|list }} {{ [{'n': 'b'}, {'x': "
                   "'a'}]|map(attribute='n', default='z')|join }}"),
            "[1, 2, Undefined] bz");
  EXPECT_EQ(render("{{ ['a', 'b']|map('upper')|list }} {{ [1.234, 2.567]|map('round', 1)|list }} "
                   "{{ [1,2,3]|map('string')|join('-') }}"),
            "['A', 'B'] [1.2, 2.6] 1-2-3");
}

TEST(JinjaFilters, NumbersAndDefaults) {
  EXPECT_EQ(render("{{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.675|round(2) }} {{ "
                   "1|round }} {{ 2.5|round(0,'floor') }} {{ 2.4|round(0,'ceil') }}"),
            "2.0 4.0 2.57 2.67 1 2.0 3.0");
  EXPECT_EQ(render("{{ -3|abs }} {{ '12'|int }} {{ 'x'|int }} {{ '1.5'|float }} {{ 3|float }} {{ "
                   "3.7|int }} {{ ' 42 '|int }} {{ '1e3'|int }}"),
            "3 12 0 1.5 3.0 3 42 1000");
  EXPECT_EQ(render("{{ '0x1A'|int(0, 16) }} {{ 'abc'|float(1.5) }} {{ 1.0|round|int }}"),
            "26 1.5 1");
  EXPECT_EQ(render("{{ none|default('x') }} {{ false|default('x') }} {{ false|default('x', true) "
                   "}} {{ x|d('y') }} {{ ''|default('f', true) }}"),
            "None False x y f");
}

TEST(JinjaFilters, ToJsonMatchesTransformers) {
  const char* ctx =
      R"({"d": {"z": "\u00e9\ud83d\ude00", "a": [1, {"b": null}], "c": {}, "e": []}})";
  EXPECT_EQ(
      render("{{ d|tojson }}", ctx),
      "{\"z\": \"\xC3\xA9\xF0\x9F\x98\x80\", \"a\": [1, {\"b\": null}], \"c\": {}, \"e\": []}");
  EXPECT_EQ(render("{{ d.a|tojson(indent=2) }}", ctx), "[\n  1,\n  {\n    \"b\": null\n  }\n]");
  EXPECT_EQ(
      render("{{ d|tojson(sort_keys=true) }}", ctx),
      "{\"a\": [1, {\"b\": null}], \"c\": {}, \"e\": [], \"z\": \"\xC3\xA9\xF0\x9F\x98\x80\"}");
  EXPECT_EQ(
      render("{{ d.z|tojson(ensure_ascii=true) }} {{ d.a|tojson(separators=(',',':')) }}", ctx),
      "\"\\u00e9\\ud83d\\ude00\" [1,{\"b\":null}]");
  EXPECT_EQ(render("{{ '\\x01\\x7f\\u2028<>&\\''|tojson }} {{ 1.0|tojson }} {{ (1, 2)|tojson }} {{ "
                   "none|tojson }}"),
            "\"\\u0001\x7f\xE2\x80\xA8<>&'\" 1.0 [1, 2] null");
  EXPECT_EQ(render("{{ {'a': 1}|tojson(indent='\\t') }}"), "{\n\t\"a\": 1\n}");
}

TEST(JinjaTests, TypeAndValueTests) {
  EXPECT_EQ(render("{{ x is defined }} {{ none is none }} {{ 3 is divisibleby 3 }} {{ 3 is "
                   "divisibleby(2) }} {{ 'a' is string }} {{ {} is mapping }}"),
            "False True True False True True");
  EXPECT_EQ(render("{{ 1 is odd }} {{ 4 is even }} {{ 2.0 is even }} {{ 1.5 is float }} {{ true is "
                   "number }} {{ true is integer }} {{ 1 is integer }}"),
            "True True True True True False True");
  EXPECT_EQ(render("{{ [] is sequence }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ none is "
                   "iterable }} {{ x is iterable }} {{ true is boolean }}"),
            "True True False False True True");
  EXPECT_EQ(render("{{ 1 is true }} {{ true is true }} {{ 0 is false }} {{ 'A' is upper }} {{ "
                   "'abc' is lower }} {{ '' is lower }}"),
            "False True False True True False");
  EXPECT_EQ(render("{{ 3 is eq 3 }} {{ 3 is ne 3 }} {{ 3 is lt 4 }} {{ 3 is gt(1) }} {{ 3 is in "
                   "[3] }} {{ 3 is sameas 3 }} {{ 1 is equalto 1 }}"),
            "True False True True True True True");
}

TEST(JinjaMethods, Strings) {
  EXPECT_EQ(render("{{ 'a b  c'.split() }} {{ 'a,b'.split(',') }} {{ 'aXbXc'.split('X', 1) }} {{ "
                   "'aXbXc'.rsplit('X', 1) }} {{ ''.split(',') }}"),
            "['a', 'b', 'c'] ['a', 'b'] ['a', 'bXc'] ['aXb', 'c'] ['']");
  EXPECT_EQ(render("{{ '  a  b  '.split(none, 1) }} {{ '  a  b  c '.rsplit(none, 1) }} {{ "
                   "'a\\nb'.splitlines() }}"),
            "['a', 'b  '] ['  a  b', 'c'] ['a', 'b']");
  EXPECT_EQ(render("{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x  '.lstrip() }}|{{ '  x  "
                   "'.rstrip() }}|{{ 'xyx'.lstrip('x') }}"),
            "x|a|x  |  x|yx");
  EXPECT_EQ(render("{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('c','d')) }} {{ "
                   "'a-b'.replace('-', '+') }} {{ 'AbC'.upper() }} {{ 'AbC'.lower() }}"),
            "True True a+b ABC abc");
  EXPECT_EQ(render("{{ 'hello world'.title() }} {{ \"they're bill's\".title() }} {{ 'hello "
                   "world'.capitalize() }}"),
            "Hello World They'Re Bill'S Hello world");
  EXPECT_EQ(render("{{ 'ab'.find('z') }} {{ 'h\xC3\xA9llo'.find('l') }} {{ 'abcabc'.rfind('b') }} "
                   "{{ 'abab'.count('a') }} {{ ','.join(['a','b']) }}"),
            "-1 2 4 2 a,b");
  EXPECT_EQ(render("{{ 'a1'.isalnum() }} {{ '123'.isdigit() }} {{ ' '.isspace() }} {{ 'x {} y "
                   "{}'.format(1, 'z') }} {{ '{0}{a}{{}}'.format(1, a=2) }}"),
            "True True True x 1 y z 12{}");
  // Python strips Unicode whitespace (NBSP, em space), not zero-width characters.
  EXPECT_EQ(render("[{{ c.strip() }}]", R"({"c": " \u00a0hi\u2003 "})"), "[hi]");
  EXPECT_EQ(render("[{{ c|trim }}]", R"({"c": "\u200b hi \u200b"})"),
            "[\xE2\x80\x8B hi \xE2\x80\x8B]");
}

TEST(JinjaMethods, DictsAndLists) {
  EXPECT_EQ(render("{{ {'a':1}.get('b') }} {{ {'a':1}.get('b', 2) }} {{ {'a':1}.get('a') }} {{ "
                   "{'a': 1}.keys()|list }} {{ {'a': 1}.values()|list }}"),
            "None 2 1 ['a'] [1]");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %} {{ [1, 2, "
                   "1].count(1) }} {{ [5, 6].index(6) }}"),
            "a1b2 2 1");
  EXPECT_EQ(render("{{ (x or {}).get('k', 'dflt') }}"), "dflt");
}

TEST(JinjaGlobals, RangeNamespaceDictRaise) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(1,10,3)|list }} {{ range(10, 0, -3)|list }} {{ "
                   "range(0)|list }} {{ range(5)|last }}"),
            "[0, 1, 2] [1, 4, 7] [10, 7, 4, 1] [] 4");
  EXPECT_EQ(render("{{ namespace(a=1, b='c') }} {{ dict(a=1) }} {{ dict({'x': 2}, y=3) }}"),
            "<Namespace {'a': 1, 'b': 'c'}> {'a': 1} {'x': 2, 'y': 3}");
  EXPECT_NE(render_error("{{ range(100001)|length }}").find("Range too big"), std::string::npos);
  try {
    render(
        "{% for m in messages %}{% if loop.index0 == 1 %}{{ raise_exception('second: ' + m) }}{% "
        "endif %}{% endfor %}",
        R"({"messages": ["a", "b"]})");
    ADD_FAILURE() << "no exception";
  } catch (const ChatTemplateRaised& e) {
    EXPECT_STREQ(e.what(), "second: b");
  }
}

TEST(JinjaGlobals, StrftimeNowUsesTheInjectedClock) {
  ChatTemplateOptions options;
  options.now = [] {
    std::tm t{};
    t.tm_year = 124;  // 2024
    t.tm_mon = 6;
    t.tm_mday = 26;
    t.tm_wday = 5;
    return t;
  };
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %A') }} {{ "
                   "strftime_now is defined }}",
                   "{}", options),
            "26 Jul 2024 2024-07-26 Friday True");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");  // the real clock by default
}

}  // namespace
}  // namespace tokamak
