// Writer -> reader round trips: every metadata value type, nested arrays, GGUF versions 2 and
// 3, several alignments, every supported tensor type with odd shapes; typed getters.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "gguf_test_util.h"

namespace tokamak::gguf {
namespace {

using test::error_of;
using test::pattern_bytes;

// Compares two values recursively: type, item type, payload.
void expect_same(const Value& want, const Value& got, const std::string& where) {
  ASSERT_EQ(want.type(), got.type()) << where;
  switch (want.type()) {
    case ValueType::ARRAY: {
      ASSERT_EQ(want.elem_type(), got.elem_type()) << where;
      const auto& a = want.as_array();
      const auto& b = got.as_array();
      ASSERT_EQ(a.size(), b.size()) << where;
      for (size_t i = 0; i < a.size(); ++i) {
        expect_same(a[i], b[i], where + "[" + std::to_string(i) + "]");
      }
      break;
    }
    case ValueType::STRING: EXPECT_EQ(want.as_string(), got.as_string()) << where; break;
    case ValueType::BOOL: EXPECT_EQ(want.as_bool(), got.as_bool()) << where; break;
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: {
      const double x = want.as_f64();
      const double y = got.as_f64();
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(y)) << where;
      } else {
        EXPECT_EQ(x, y) << where;
      }
      break;
    }
    case ValueType::UINT64: EXPECT_EQ(want.as_u64(), got.as_u64()) << where; break;
    default: EXPECT_EQ(want.as_i64(), got.as_i64()) << where;
  }
}

// Every value type, at its extremes where it has them, plus arrays of each and nested arrays.
std::vector<std::pair<std::string, Value>> every_kind_of_value() {
  using L8 = std::numeric_limits<int8_t>;
  using L16 = std::numeric_limits<int16_t>;
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  std::vector<std::pair<std::string, Value>> kv = {
      {"u8.max", Value::u8(255)},
      {"u8.zero", Value::u8(0)},
      {"i8.min", Value::i8(L8::min())},
      {"i8.max", Value::i8(L8::max())},
      {"u16.max", Value::u16(65535)},
      {"i16.min", Value::i16(L16::min())},
      {"u32.max", Value::u32(std::numeric_limits<uint32_t>::max())},
      {"i32.min", Value::i32(L32::min())},
      {"u64.max", Value::u64(std::numeric_limits<uint64_t>::max())},
      {"i64.min", Value::i64(L64::min())},
      {"i64.max", Value::i64(L64::max())},
      {"f32.small", Value::f32(1e-5f)},
      {"f32.inf", Value::f32(-std::numeric_limits<float>::infinity())},
      {"f32.nan", Value::f32(std::numeric_limits<float>::quiet_NaN())},
      {"f32.denormal", Value::f32(std::numeric_limits<float>::denorm_min())},
      {"f64.pi", Value::f64(3.141592653589793)},
      {"f64.tiny", Value::f64(std::numeric_limits<double>::denorm_min())},
      {"bool.true", Value::boolean(true)},
      {"bool.false", Value::boolean(false)},
      {"string.empty", Value::string("")},
      {"string.utf8", Value::string("h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80")},
      {"string.binary", Value::string(std::string("a\0b\n\"\xff", 6))},
      {"string.long", Value::string(std::string(5000, 'x'))},
      {"", Value::string("empty key")},
  };
  // An array of each scalar type, and an empty one of each.
  for (const auto& [key, v] : std::vector(kv)) {
    kv.emplace_back("array." + key, Value::array(v.type(), {v, v, v}));
    kv.emplace_back("empty." + key, Value::array(v.type(), {}));
  }
  const auto strings = [](std::initializer_list<const char*> items) {
    Value::Array a;
    for (const char* s : items) a.push_back(Value::string(s));
    return Value::array(ValueType::STRING, std::move(a));
  };
  kv.emplace_back("nested.strings",
                  Value::array(ValueType::ARRAY,
                               {strings({"a", "bc"}), strings({}), strings({"", "def", "g"})}));
  kv.emplace_back("nested.empty", Value::array(ValueType::ARRAY, {}));
  kv.emplace_back(
      "nested.mixed",
      Value::array(ValueType::ARRAY, {Value::array(ValueType::UINT8, {Value::u8(1)}),
                                      Value::array(ValueType::FLOAT64, {}), strings({"x"})}));
  // kMaxArrayDepth levels of arrays, the deepest the reader accepts.
  Value deep = strings({"bottom"});
  for (int level = 1; level < kMaxArrayDepth; ++level) {
    deep = Value::array(ValueType::ARRAY, {deep, Value::array(ValueType::INT32, {})});
  }
  kv.emplace_back("nested.deepest", deep);
  return kv;
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
};

// Every supported tensor type with odd shapes, 1 to 4 dimensions.
std::vector<Tensor> every_kind_of_tensor() {
  return {
      {"f32.1d", {7}, DType::F32},
      {"f32.4d", {3, 5, 1, 2}, DType::F32},
      {"f16.odd", {13, 3}, DType::F16},
      {"bf16.odd", {1, 9, 3}, DType::BF16},
      {"q8_0", {96, 3}, DType::Q8_0},
      {"q4_0", {32, 1, 5}, DType::Q4_0},
      {"q4_1", {64, 7}, DType::Q4_1},
      {"q4_1.4d", {32, 1, 1, 1}, DType::Q4_1},
      {"blk.0.attn_q.weight", {1}, DType::F32},
  };
}

class RoundTrip : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {};

TEST_P(RoundTrip, EveryValueAndTensorSurvives) {
  const auto [version, alignment] = GetParam();
  Writer w(version, alignment);
  const auto values = every_kind_of_value();
  for (const auto& [key, value] : values) w.set(key, value);
  const auto tensors = every_kind_of_tensor();
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    size_t rows = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) rows *= static_cast<size_t>(t.shape[d]);
    data.push_back(pattern_bytes(row_bytes(t.dtype, t.shape[0]) * rows, static_cast<uint8_t>(i)));
    w.add_tensor(t.name, t.shape, t.dtype, data.back());
  }

  // Both through memory and through a file on disk.
  test::TempDir dir;
  const std::string path = dir.file("roundtrip.gguf");
  w.write(path);
  const auto bytes = w.to_bytes();
  for (const File& f : {File::from_bytes("mem.gguf", bytes), File::open(path)}) {
    SCOPED_TRACE(f.path());
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.file_size(), bytes.size());
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    EXPECT_EQ(f.has("general.alignment"), alignment != kDefaultAlignment);
    if (alignment != kDefaultAlignment) {
      EXPECT_EQ(f.get_int("general.alignment"), alignment);
    }

    const size_t extra = alignment != kDefaultAlignment ? 1 : 0;
    ASSERT_EQ(f.metadata().size(), values.size() + extra);
    for (size_t i = 0; i < values.size(); ++i) {
      const auto& [key, got] = f.metadata()[i + extra];  // file order is insertion order
      EXPECT_EQ(key, values[i].first);
      expect_same(values[i].second, got, key);
      ASSERT_NE(f.find(key), nullptr) << key;
      EXPECT_EQ(f.find(key), &got) << key;
    }

    ASSERT_EQ(f.tensors().size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorInfo& t = f.tensors()[i];
      EXPECT_EQ(t.name, tensors[i].name);
      EXPECT_EQ(t.shape, tensors[i].shape);
      EXPECT_EQ(t.dtype, tensors[i].dtype);
      EXPECT_EQ(t.nbytes, data[i].size());
      EXPECT_EQ(t.offset % alignment, 0u);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % std::min<uint32_t>(alignment, 4096), 0u);
      ASSERT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), data[i]) << t.name;
      EXPECT_EQ(f.find_tensor(t.name), &t);
    }
    EXPECT_EQ(f.find_tensor("missing"), nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, RoundTrip,
                         ::testing::Combine(::testing::Values(2u, 3u),
                                            ::testing::Values(1u, 8u, 32u, 64u, 256u)),
                         [](const auto& info) {
                           return fmt::format("v{}_align{}", std::get<0>(info.param),
                                              std::get<1>(info.param));
                         });

TEST(RoundTrip, NoMetadataNoTensors) {
  const auto bytes = Writer().to_bytes();
  EXPECT_EQ(bytes.size(), 32u);  // the 24-byte header, padded to the alignment
  const File f = File::from_bytes("empty.gguf", bytes);
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_TRUE(f.tensors().empty());
}

TEST(RoundTrip, TensorsWithoutMetadata) {
  Writer w;
  w.add_tensor("x", {2}, DType::F32, pattern_bytes(8, 0));
  const File f = File::from_bytes("t.gguf", w.to_bytes());
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.data_offset(), 64u);  // 24-byte header + 33-byte tensor info, padded to 32
  EXPECT_EQ(f.tensors()[0].n_elements(), 2);
}

TEST(RoundTrip, SetReplacesInPlace) {
  Writer w;
  w.set("a", Value::u32(1));
  w.set("b", Value::u32(2));
  w.set("a", Value::string("again"));
  const File f = File::from_bytes("t.gguf", w.to_bytes());
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].first, "a");
  EXPECT_EQ(f.get_string("a"), "again");
}

TEST(RoundTrip, AlignmentSetAsMetadataIsUsed) {
  Writer w;
  w.set("general.alignment", Value::u32(128));
  w.add_tensor("x", {3}, DType::F32, pattern_bytes(12, 0));
  w.add_tensor("y", {3}, DType::F32, pattern_bytes(12, 1));
  EXPECT_EQ(w.alignment(), 128u);
  const File f = File::from_bytes("t.gguf", w.to_bytes());
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.tensors()[1].offset, 128u);
}

// ---- typed getters -------------------------------------------------------------------------

class Getters : public ::testing::Test {
 protected:
  static File make() {
    Writer w;
    w.set("s", Value::string("text"));
    w.set("u32", Value::u32(7));
    w.set("i8", Value::i8(-3));
    w.set("u64.big", Value::u64(std::numeric_limits<uint64_t>::max()));
    w.set("f32", Value::f32(0.5f));
    w.set("f64", Value::f64(-2.25));
    w.set("b", Value::boolean(true));
    w.set("arr", Value::array(ValueType::UINT32, {Value::u32(1), Value::u32(2)}));
    return File::from_bytes("getters.gguf", w.to_bytes());
  }
  const File f = make();
};

TEST_F(Getters, PresentValues) {
  EXPECT_EQ(f.get_string("s"), "text");
  EXPECT_EQ(f.get_int("u32"), 7);
  EXPECT_EQ(f.get_int("i8"), -3);
  EXPECT_EQ(f.get_float("f32"), 0.5);
  EXPECT_EQ(f.get_float("f64"), -2.25);
  EXPECT_EQ(f.get_float("u32"), 7.0);  // integers are numbers too
  EXPECT_EQ(f.get_bool("b"), true);
  ASSERT_NE(f.get_array("arr"), nullptr);
  EXPECT_EQ(f.get_array("arr")->size(), 2u);
  EXPECT_EQ(f.find("u64.big")->as_u64(), std::numeric_limits<uint64_t>::max());
}

TEST_F(Getters, AbsentValues) {
  EXPECT_FALSE(f.get_string("nope"));
  EXPECT_FALSE(f.get_int("nope"));
  EXPECT_FALSE(f.get_float("nope"));
  EXPECT_FALSE(f.get_bool("nope"));
  EXPECT_EQ(f.get_array("nope"), nullptr);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_FALSE(f.has("nope"));
  EXPECT_TRUE(f.has("s"));
}

TEST_F(Getters, WrongTypesNameFileAndKey) {
  const auto check = [](const std::string& msg, const std::string& key, const std::string& what) {
    EXPECT_EQ(msg.rfind("getters.gguf: metadata '" + key + "'", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  check(error_of([&] { f.get_string("u32"); }), "u32", "expected a string, found uint32");
  check(error_of([&] { f.get_int("s"); }), "s", "expected an integer, found string");
  check(error_of([&] { f.get_int("f32"); }), "f32", "expected an integer, found float32");
  check(error_of([&] { f.get_int("b"); }), "b", "expected an integer, found bool");
  check(error_of([&] { f.get_int("u64.big"); }), "u64.big", "out of range");
  check(error_of([&] { f.get_float("s"); }), "s", "expected a number, found string");
  check(error_of([&] { f.get_float("arr"); }), "arr", "expected a number, found array");
  check(error_of([&] { f.get_bool("u32"); }), "u32", "expected a bool, found uint32");
  check(error_of([&] { f.get_array("s"); }), "s", "expected an array, found string");
}

}  // namespace
}  // namespace tokamak::gguf
