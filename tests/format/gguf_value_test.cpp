// gguf::Value: conversions between kinds and the one-line display used by listings.

#include "format/gguf_value.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"

namespace tokamak::gguf {
namespace {

TEST(Value, IntegerConversions) {
  EXPECT_EQ(Value::u8(200).as_i64(), 200);
  EXPECT_EQ(Value::i16(-5).as_i64(), -5);
  EXPECT_EQ(Value::u32(7).as_u64(), 7u);
  EXPECT_EQ(Value::i64(9).as_u64(), 9u);
  EXPECT_THROW(Value::i32(-1).as_u64(), Error);
  EXPECT_THROW(Value::u64(std::numeric_limits<uint64_t>::max()).as_i64(), Error);
  EXPECT_EQ(Value::u32(3).as_f64(), 3.0);
  EXPECT_THROW(Value::boolean(true).as_i64(), Error);
  EXPECT_THROW(Value::f32(1).as_i64(), Error);
  EXPECT_THROW(Value::string("1").as_f64(), Error);
  EXPECT_THROW(Value::u8(1).as_bool(), Error);
  EXPECT_THROW(Value::u8(1).as_string(), Error);
  EXPECT_THROW(Value::u8(1).as_array(), Error);
}

TEST(Value, Kinds) {
  EXPECT_TRUE(Value::i8(1).is_integer());
  EXPECT_TRUE(Value::u64(1).is_integer());
  EXPECT_FALSE(Value::boolean(true).is_integer());
  EXPECT_TRUE(Value::f64(1).is_float());
  EXPECT_TRUE(Value::string("").is_string());
  EXPECT_TRUE(Value::array(ValueType::UINT8, {}).is_array());
  EXPECT_EQ(Value::array(ValueType::STRING, {}).elem_type(), ValueType::STRING);
  EXPECT_TRUE(Value::boolean(false).is_bool());
  EXPECT_STREQ(value_type_name(ValueType::FLOAT64), "float64");
}

TEST(Value, DisplayScalars) {
  EXPECT_EQ(Value::u32(4294967295u).to_display_string(), "4294967295");
  EXPECT_EQ(Value::i8(-128).to_display_string(), "-128");
  EXPECT_EQ(Value::f32(1e-5f).to_display_string(), "1e-05");
  EXPECT_EQ(Value::f32(100000.0f).to_display_string(), "100000");
  EXPECT_EQ(Value::f32(0.1f).to_display_string(), "0.1");
  EXPECT_EQ(Value::f64(0.1).to_display_string(), "0.1");
  EXPECT_EQ(Value::f64(1e-12).to_display_string(), "1e-12");
  EXPECT_EQ(Value::boolean(true).to_display_string(), "true");
}

TEST(Value, DisplayStringsAreOneEscapedLine) {
  EXPECT_EQ(Value::string("a\"b\\c\nd\te\x01").to_display_string(), R"("a\"b\\c\nd\te\x01")");
  EXPECT_EQ(Value::string("\xc3\xa9").to_display_string(), "\"\xc3\xa9\"");
  const std::string shown = Value::string(std::string(1000, 'x')).to_display_string();
  EXPECT_EQ(shown, "\"" + std::string(200, 'x') + "...\"");
}

TEST(Value, EscapeCutsOnlyBetweenCharacters) {
  // 'é' is 2 bytes: a cut after 3 bytes keeps the second 'é' whole.
  EXPECT_EQ(escape("\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9\xc3\xa9...");
  EXPECT_EQ(escape("abc", 3), "abc");
  EXPECT_EQ(escape("abcd", 3), "abc...");
  // Stray continuation bytes cannot keep it going forever.
  EXPECT_LE(escape(std::string(1000, '\x80'), 10).size(), 20u);
  EXPECT_EQ(escape(std::string("\0", 1)), "\\x00");
}

TEST(Value, DisplayArraysAbbreviated) {
  Value::Array items;
  for (int i = 0; i < 20; ++i) items.push_back(Value::i32(i));
  const Value a = Value::array(ValueType::INT32, items);
  EXPECT_EQ(a.to_display_string(3), "[0, 1, 2, ... (20 items)]");
  EXPECT_EQ(a.to_display_string(0), "[... (20 items)]");
  EXPECT_EQ(Value::array(ValueType::STRING, {}).to_display_string(), "[]");
  const Value nested =
      Value::array(ValueType::ARRAY, {Value::array(ValueType::STRING, {Value::string("x")}), a});
  EXPECT_EQ(nested.to_display_string(2), "[[\"x\"], [0, 1, ... (20 items)]]");
}

}  // namespace
}  // namespace tokamak::gguf
