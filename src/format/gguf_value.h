#pragma once
// A GGUF metadata value: a scalar, a string, or an array of values (arrays may nest).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace tokamak::gguf {

// Wire ids of GGUF value types.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

const char* value_type_name(ValueType type);

// `s` made printable on one line: backslash, double quote and control bytes escaped (\n, \t,
// \xNN), other bytes (UTF-8 included) kept; cut after about `max_bytes` bytes, never inside
// a UTF-8 sequence, with "..." appended. For messages and listings of text from a file.
std::string escape(std::string_view s, size_t max_bytes = 200);

class Value {
 public:
  using Array = std::vector<Value>;

  Value() : type_(ValueType::UINT8), data_(uint64_t{0}) {}
  static Value u8(uint8_t v) { return Value(ValueType::UINT8, uint64_t{v}); }
  static Value i8(int8_t v) { return Value(ValueType::INT8, int64_t{v}); }
  static Value u16(uint16_t v) { return Value(ValueType::UINT16, uint64_t{v}); }
  static Value i16(int16_t v) { return Value(ValueType::INT16, int64_t{v}); }
  static Value u32(uint32_t v) { return Value(ValueType::UINT32, uint64_t{v}); }
  static Value i32(int32_t v) { return Value(ValueType::INT32, int64_t{v}); }
  static Value u64(uint64_t v) { return Value(ValueType::UINT64, v); }
  static Value i64(int64_t v) { return Value(ValueType::INT64, v); }
  static Value f32(float v) { return Value(ValueType::FLOAT32, double{v}); }
  static Value f64(double v) { return Value(ValueType::FLOAT64, v); }
  static Value boolean(bool v) { return Value(ValueType::BOOL, v); }
  static Value string(std::string v) { return Value(ValueType::STRING, std::move(v)); }
  // An array whose items all have type `elem_type` (checked by the writer).
  static Value array(ValueType elem_type, Array items) {
    Value v(ValueType::ARRAY, std::move(items));
    v.elem_type_ = elem_type;
    return v;
  }

  ValueType type() const { return type_; }
  ValueType elem_type() const { return elem_type_; }  // for arrays only
  bool is_integer() const;
  bool is_float() const { return type_ == ValueType::FLOAT32 || type_ == ValueType::FLOAT64; }
  bool is_string() const { return type_ == ValueType::STRING; }
  bool is_array() const { return type_ == ValueType::ARRAY; }
  bool is_bool() const { return type_ == ValueType::BOOL; }

  // Typed access; each throws Error if the value has another kind (integers convert among
  // themselves when the value fits, and to double; bool does not convert).
  int64_t as_i64() const;
  uint64_t as_u64() const;
  double as_f64() const;
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;

  // One line for listings: strings quoted and escaped, floats in shortest form ("1e-05"),
  // arrays as "[a, b, ... (n items)]" showing at most `max_items` items per level.
  std::string to_display_string(size_t max_items = 8) const;

 private:
  using Data = std::variant<uint64_t, int64_t, double, bool, std::string, Array>;
  // Constructs the alternative in place (moving a whole Data makes GCC 12 warn falsely of
  // uninitialized reads in sanitizer builds).
  template <typename T>
  Value(ValueType type, T&& v)
      : type_(type), data_(std::in_place_type<std::decay_t<T>>, std::forward<T>(v)) {}

  ValueType type_;
  ValueType elem_type_ = ValueType::UINT8;
  Data data_;
};

}  // namespace tokamak::gguf
