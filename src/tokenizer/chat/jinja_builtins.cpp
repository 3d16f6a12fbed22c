// Argument binding and helpers shared by the filters, tests, methods and globals.

#include "tokenizer/chat/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

void type_error(const std::string& message) {
  throw RenderError(message);
}

int64_t require_int(const Value& v, std::string_view what) {
  if (v.is_int() || v.is_bool()) return v.to_int();
  type_error(std::string(what) + " must be an integer, not " + v.type_name());
}

ArgBinder::ArgBinder(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> params)
    : function_(function), params_(params), bound_(params.size(), nullptr) {
  if (args.positional.size() > params_.size()) {
    type_error(function_ + "() takes at most " + std::to_string(params_.size()) + " argument(s) (" +
               std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    const auto it = std::find(params_.begin(), params_.end(), key);
    if (it == params_.end())
      type_error(function_ + "() got an unexpected keyword argument '" + key + "'");
    const size_t index = static_cast<size_t>(it - params_.begin());
    if (bound_[index]) type_error(function_ + "() got multiple values for argument '" + key + "'");
    bound_[index] = &value;
  }
}

const Value& ArgBinder::required(size_t index) const {
  if (!bound_[index]) {
    type_error(function_ + "() missing required argument '" + std::string(params_[index]) + "'");
  }
  return *bound_[index];
}

int64_t ArgBinder::int_or(size_t index, int64_t fallback) const {
  if (!bound_[index] || bound_[index]->is_none()) return fallback;
  return require_int(*bound_[index],
                     function_ + "() argument '" + std::string(params_[index]) + "'");
}

bool ArgBinder::bool_or(size_t index, bool fallback) const {
  return bound_[index] ? bound_[index]->truthy() : fallback;
}

std::string ArgBinder::string_or(size_t index, std::string fallback) const {
  if (!bound_[index] || bound_[index]->is_none()) return fallback;
  if (!bound_[index]->is_string()) {
    type_error(function_ + "() argument '" + std::string(params_[index]) +
               "' must be a string, not " + bound_[index]->type_name());
  }
  return bound_[index]->as_string();
}

Value get_attribute_path(Interpreter& in, const Value& item, std::string_view path) {
  // Jinja's make_attrgetter: "a.b.0" is item["a"]["b"][0], each step via getitem.
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    current =
        in.get_item(current, numeric ? Value(static_cast<int64_t>(std::stoll(std::string(part))))
                                     : Value(part));
    if (dot == std::string_view::npos) return current;
    start = dot + 1;
  }
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (char32_t c : py::decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c > 0xFFFF) {  // a surrogate pair, as Python writes it
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      py::append_utf8(out, c);
    }
  }
  out.push_back('"');
}

struct JsonWriter {
  bool ensure_ascii;
  std::optional<std::string> indent;  // absent: single line
  std::string_view item_sep;
  std::string_view key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    if (!indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *indent;
  }

  std::string key_text(const Value& key) {
    if (key.is_string()) return key.as_string();
    if (key.is_bool()) return key.as_bool() ? "true" : "false";
    if (key.is_int()) return std::to_string(key.as_int());
    if (key.is_float()) return py::float_repr(key.as_float());
    if (key.is_none()) return "null";
    type_error("keys must be str, int, float, bool or None, not " + key.type_name());
  }

  void write(const Value& v, int level) {
    if (level > 256) type_error("tojson: value nested too deeply");
    switch (v.kind()) {
      case Value::Kind::None:
        out += "null";
        return;
      case Value::Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::Int:
        out += std::to_string(v.as_int());
        return;
      case Value::Kind::Float: {
        const double d = v.as_float();
        out += std::isnan(d)   ? "NaN"
               : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                               : py::float_repr(d);
        return;
      }
      case Value::Kind::String:
        json_string(out, v.as_string(), ensure_ascii);
        return;
      case Value::Kind::List: {
        const List& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += item_sep;
          newline(level + 1);
          write(items[i], level + 1);
        }
        newline(level);
        out.push_back(']');
        return;
      }
      case Value::Kind::Dict: {
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& [key, value] : v.as_dict().items)
          items.emplace_back(key_text(key), &value);
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (sort_keys) {
          std::stable_sort(items.begin(), items.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out.push_back('{');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += item_sep;
          newline(level + 1);
          json_string(out, items[i].first, ensure_ascii);
          out += key_sep;
          write(*items[i].second, level + 1);
        }
        newline(level);
        out.push_back('}');
        return;
      }
      default:
        type_error("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, bool ensure_ascii, const Value& indent,
                    std::string_view item_sep, std::string_view key_sep, bool sort_keys) {
  JsonWriter w{ensure_ascii, std::nullopt, item_sep, key_sep, sort_keys, {}};
  if (indent.is_string()) {
    w.indent = indent.as_string();
  } else if (indent.is_int() || indent.is_bool()) {
    w.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.to_int())), ' ');
  } else if (!indent.is_none() && !indent.is_undefined()) {
    type_error("tojson indent must be an integer or a string, not " + indent.type_name());
  }
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace tokamak::jinja
