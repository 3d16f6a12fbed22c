// Python str semantics over UTF-8: expected values are CPython's.

#include "tokenizer/chat/py_string.h"

#include <gtest/gtest.h>

#include <limits>

namespace tokamak::jinja::py {
namespace {

TEST(PyString, FloatRepr) {
  EXPECT_EQ(float_repr(1.0), "1.0");
  EXPECT_EQ(float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(float_repr(0.0001), "0.0001");
  EXPECT_EQ(float_repr(0.00001), "1e-05");
  EXPECT_EQ(float_repr(-0.0), "-0.0");
  EXPECT_EQ(float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(float_repr(123.456), "123.456");
  EXPECT_EQ(float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(float_repr(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST(PyString, Repr) {
  EXPECT_EQ(repr("abc"), "'abc'");
  EXPECT_EQ(repr("it's"), "\"it's\"");
  EXPECT_EQ(repr("a\"b'c"), "'a\"b\\'c'");
  EXPECT_EQ(repr("x\ny\t\\"), "'x\\ny\\t\\\\'");
  EXPECT_EQ(repr("\x01\x7f\xC2\xA0\xC3\xA9"), "'\\x01\\x7f\\xa0\xC3\xA9'");
  EXPECT_EQ(repr("\xF0\x9F\x98\x80"), "'\xF0\x9F\x98\x80'");
}

TEST(PyString, LengthAndInvalidBytesRoundTrip) {
  EXPECT_EQ(length("h\xC3\xA9llo \xF0\x9F\x98\x80"), 7u);
  const std::string invalid = "a\xFF\xC3(b";
  EXPECT_EQ(decode(invalid).size(), 5u);
  EXPECT_EQ(encode(decode(invalid)), invalid);
}

TEST(PyString, StripAndSplit) {
  EXPECT_EQ(strip(" \xC2\xA0hi\xE2\x80\x83 ", std::nullopt, true, true), "hi");
  EXPECT_EQ(strip("xxaxx", std::string("x"), true, false), "axx");
  EXPECT_EQ(split("  a  b  ", std::nullopt, -1, false), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split("a,,b", std::string(","), -1, false), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("a::b::c", std::string("::"), 1, true), (std::vector<std::string>{"a::b", "c"}));
  EXPECT_EQ(splitlines("a\r\nb\nc\r"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(PyString, CaseMapping) {
  EXPECT_EQ(upper("abc \xC3\xA9"), "ABC \xC3\x89");
  EXPECT_EQ(lower("\xC3\x80\xC3\x89X"), "\xC3\xA0\xC3\xA9x");
  EXPECT_EQ(title_method("hello wORLD 1st"), "Hello World 1St");
  EXPECT_EQ(title_filter("hello-world foo_bar"), "Hello-World Foo_bar");
  EXPECT_EQ(capitalize("hELLO"), "Hello");
  EXPECT_TRUE(is_upper("ABC1"));
  EXPECT_FALSE(is_lower("123"));
}

TEST(PyString, ReplaceFindCount) {
  EXPECT_EQ(replace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(replace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(find("h\xC3\xA9llo", "l", false), 2);
  EXPECT_EQ(find("abcabc", "b", true), 4);
  EXPECT_EQ(count("abab", "a"), 2);
}

}  // namespace
}  // namespace tokamak::jinja::py
