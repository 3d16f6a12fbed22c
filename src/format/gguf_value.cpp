#include "format/gguf_value.h"

#include <limits>

#include "core/error.h"

namespace tokamak::gguf {

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UINT8: return "uint8";
    case ValueType::INT8: return "int8";
    case ValueType::UINT16: return "uint16";
    case ValueType::INT16: return "int16";
    case ValueType::UINT32: return "uint32";
    case ValueType::INT32: return "int32";
    case ValueType::FLOAT32: return "float32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::UINT64: return "uint64";
    case ValueType::INT64: return "int64";
    case ValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data_) || std::holds_alternative<int64_t>(data_);
}

int64_t Value::as_i64() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error("integer value out of range");
    }
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data_)) return *i;
  throw Error(std::string("expected an integer, found ") + value_type_name(type_));
}

uint64_t Value::as_u64() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data_)) {
    if (*i < 0) throw Error("negative value where an unsigned one is expected");
    return static_cast<uint64_t>(*i);
  }
  throw Error(std::string("expected an integer, found ") + value_type_name(type_));
}

double Value::as_f64() const {
  if (const auto* d = std::get_if<double>(&data_)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data_)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data_)) return static_cast<double>(*i);
  throw Error(std::string("expected a number, found ") + value_type_name(type_));
}

bool Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data_)) return *b;
  throw Error(std::string("expected a bool, found ") + value_type_name(type_));
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&data_)) return *s;
  throw Error(std::string("expected a string, found ") + value_type_name(type_));
}

const Value::Array& Value::as_array() const {
  if (const auto* a = std::get_if<Array>(&data_)) return *a;
  throw Error(std::string("expected an array, found ") + value_type_name(type_));
}

std::string Value::to_display_string(size_t max_items) const {
  switch (type_) {
    case ValueType::STRING: {
      const auto& s = as_string();
      std::string out = "\"";
      for (size_t i = 0; i < s.size() && i < 200; ++i) {
        const char c = s[i];
        if (c == '\n') out += "\\n";
        else if (c == '"') out += "\\\"";
        else out += c;
      }
      if (s.size() > 200) out += "...";
      return out + "\"";
    }
    case ValueType::ARRAY: {
      const auto& a = as_array();
      std::string out = "[";
      for (size_t i = 0; i < a.size() && i < max_items; ++i) {
        if (i) out += ", ";
        out += a[i].to_display_string(max_items);
      }
      if (a.size() > max_items) out += ", ... (" + std::to_string(a.size()) + " items)";
      return out + "]";
    }
    case ValueType::BOOL: return as_bool() ? "true" : "false";
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: return std::to_string(as_f64());
    default:
      if (std::holds_alternative<int64_t>(data_)) return std::to_string(std::get<int64_t>(data_));
      return std::to_string(std::get<uint64_t>(data_));
  }
}

}  // namespace tokamak::gguf
