#include "format/gguf_value.h"

#include <fmt/format.h>

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

std::string escape(std::string_view s, size_t max_bytes) {
  std::string out;
  out.reserve(s.size() < max_bytes ? s.size() : max_bytes);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    // Stop at the limit, but not between a UTF-8 lead byte and its (at most 3) continuation
    // bytes.
    if (i >= max_bytes && ((c & 0xc0) != 0x80 || i >= max_bytes + 3)) {
      out += "...";
      break;
    }
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data_) || std::holds_alternative<int64_t>(data_);
}

int64_t Value::as_i64() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error("integer value " + std::to_string(*u) + " is out of range");
    }
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data_)) return *i;
  throw Error(std::string("expected an integer, found ") + value_type_name(type_));
}

uint64_t Value::as_u64() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data_)) {
    if (*i < 0) {
      throw Error("negative value " + std::to_string(*i) + " where an unsigned one is expected");
    }
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
      std::string out = "\"";  // appended: GCC 12 warns falsely on "literal" + std::string&&
      out += escape(as_string());
      out += '"';
      return out;
    }
    case ValueType::ARRAY: {
      const auto& a = as_array();
      std::string out = "[";
      for (size_t i = 0; i < a.size() && i < max_items; ++i) {
        if (i) out += ", ";
        out += a[i].to_display_string(max_items);
      }
      if (a.size() > max_items) {
        out += (max_items ? ", ... (" : "... (") + std::to_string(a.size()) + " items)";
      }
      return out + "]";
    }
    case ValueType::BOOL: return as_bool() ? "true" : "false";
    // Shortest text that reads back as the same value; a float32 as a float, so that
    // 1e-5f shows as 1e-05 and not as its double expansion.
    case ValueType::FLOAT32: return fmt::format("{}", static_cast<float>(std::get<double>(data_)));
    case ValueType::FLOAT64: return fmt::format("{}", std::get<double>(data_));
    default:
      if (const auto* i = std::get_if<int64_t>(&data_)) return std::to_string(*i);
      return std::to_string(std::get<uint64_t>(data_));
  }
}

}  // namespace tokamak::gguf
