// Jinja's built-in filters that chat templates use, with Jinja 3.1 semantics, and
// transformers' tojson (json.dumps with ensure_ascii=False, keys in insertion order).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "tokenizer/chat/jinja_builtins.h"
#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_operators.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

using Args = CallArgs;

Value f_length(Interpreter&, const Value& v, Args& args) {
  ArgBinder("length", args, {});
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return 0;
    case Value::Kind::String:
      return static_cast<int64_t>(py::length(v.as_string()));
    case Value::Kind::List:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::Dict:
      return static_cast<int64_t>(v.as_dict().items.size());
    default:
      type_error("object of type '" + v.type_name() + "' has no len()");
  }
}

Value f_string(Interpreter&, const Value& v, Args& args) {
  ArgBinder("string", args, {});
  return v.str();
}

Value f_trim(Interpreter&, const Value& v, Args& args) {
  ArgBinder a("trim", args, {"chars"});
  std::optional<std::string> chars;
  if (a.get(0) && !a.get(0)->is_none()) chars = a.string_or(0, "");
  return py::strip(v.str(), chars, true, true);
}

Value f_upper(Interpreter&, const Value& v, Args& args) {
  ArgBinder("upper", args, {});
  return py::upper(v.str());
}

Value f_lower(Interpreter&, const Value& v, Args& args) {
  ArgBinder("lower", args, {});
  return py::lower(v.str());
}

Value f_title(Interpreter&, const Value& v, Args& args) {
  ArgBinder("title", args, {});
  return py::title_filter(v.str());
}

Value f_capitalize(Interpreter&, const Value& v, Args& args) {
  ArgBinder("capitalize", args, {});
  return py::capitalize(v.str());
}

Value f_replace(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("replace", args, {"old", "new", "count"});
  std::string out = py::replace(v.str(), a.required(0).str(), a.required(1).str(), a.int_or(2, -1));
  in.check_size(out.size());
  return out;
}

Value f_default(Interpreter&, const Value& v, Args& args) {
  ArgBinder a("default", args, {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (a.bool_or(1, false) && !v.truthy());
  return use_default ? a.get_or(0, Value("")) : v;
}

Value f_first(Interpreter& in, const Value& v, Args& args) {
  ArgBinder("first", args, {});
  const List items = in.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter& in, const Value& v, Args& args) {
  ArgBinder("last", args, {});
  const List items = in.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_list(Interpreter& in, const Value& v, Args& args) {
  ArgBinder("list", args, {});
  return Value(in.iterate(v));
}

Value f_join(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("join", args, {"d", "attribute"});
  const std::string sep = a.get(0) ? a.get(0)->str() : "";
  std::string out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += a.get(1) && !a.get(1)->is_none() ? get_attribute_path(in, item, a.get(1)->str()).str()
                                            : item.str();
    in.check_size(out.size());
  }
  return out;
}

Value f_reverse(Interpreter& in, const Value& v, Args& args) {
  ArgBinder("reverse", args, {});
  if (v.is_string()) {
    std::u32string text = py::decode(v.as_string());
    std::reverse(text.begin(), text.end());
    return py::encode(text);
  }
  List items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value f_items(Interpreter&, const Value& v, Args& args) {
  ArgBinder("items", args, {});
  if (v.is_undefined()) return Value(List{});
  if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
  List pairs;
  for (const auto& [k, val] : v.as_dict().items) pairs.emplace_back(List{k, val}, true);
  return Value(std::move(pairs));
}

Value f_tojson(Interpreter& in, const Value& v, Args& args) {
  // transformers: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
  //                          sort_keys=sort_keys)
  ArgBinder a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  const Value indent = a.get_or(1, Value::none());
  std::string item_sep = indent.is_none() ? ", " : ",";
  std::string key_sep = ": ";
  if (const Value* seps = a.get(2); seps && !seps->is_none()) {
    if (!seps->is_list() || seps->as_list().size() != 2)
      type_error("tojson separators must be a pair of strings");
    item_sep = seps->as_list()[0].str();
    key_sep = seps->as_list()[1].str();
  }
  std::string out = to_json(v, a.bool_or(0, false), indent, item_sep, key_sep, a.bool_or(3, false));
  in.check_size(out.size());
  return out;
}

Value f_int(Interpreter&, const Value& v, Args& args) {
  ArgBinder a("int", args, {"default", "base"});
  const Value fallback = a.get_or(0, Value(0));
  if (v.is_int() || v.is_bool()) return v.to_int();
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return static_cast<int64_t>(d);
  }
  if (!v.is_string()) return fallback;
  const std::string s = py::strip(v.as_string(), std::nullopt, true, true);
  std::string digits;
  for (char c : s) {
    if (c != '_') digits.push_back(c);
  }
  const int base = static_cast<int>(a.int_or(1, 10));
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(digits.c_str(), &end, base);
  if (!digits.empty() && end && *end == '\0' && errno == 0) return static_cast<int64_t>(parsed);
  const double d = std::strtod(digits.c_str(), &end);  // int(float(s)) fallback
  if (!digits.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
    return static_cast<int64_t>(d);
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& v, Args& args) {
  ArgBinder a("float", args, {"default"});
  const Value fallback = a.get_or(0, Value(0.0));
  if (v.is_number()) return v.to_double();
  if (!v.is_string()) return fallback;
  const std::string s = py::strip(v.as_string(), std::nullopt, true, true);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  return (!s.empty() && end && *end == '\0') ? Value(d) : fallback;
}

Value f_abs(Interpreter&, const Value& v, Args& args) {
  ArgBinder("abs", args, {});
  if (v.is_float()) return std::fabs(v.as_float());
  if (v.is_int() || v.is_bool()) return v.to_int() < 0 ? negate(v) : Value(v.to_int());
  type_error("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_round(Interpreter&, const Value& v, Args& args) {
  ArgBinder a("round", args, {"precision", "method"});
  const int64_t precision = a.int_or(0, 0);
  const std::string method = a.string_or(1, "common");
  if (!v.is_number()) type_error("round() needs a number, not " + v.type_name());
  if (method == "common") {
    if (!v.is_float()) return v.to_int();  // Python: round(int, n) stays an int (n >= 0)
    if (precision < 0 || precision > 300) type_error("round() precision out of range");
    // glibc's printf rounds the exact binary value half-to-even, as CPython's round does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.as_float());
    return std::strtod(buf, nullptr);
  }
  if (method != "floor" && method != "ceil") type_error("method must be common, ceil or floor");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.to_double() * scale;
  return (method == "floor" ? std::floor(x) : std::ceil(x)) / scale;
}

Value f_indent(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("indent", args, {"width", "first", "blank"});
  std::string indention =
      a.get(0) && a.get(0)->is_string()
          ? a.get(0)->as_string()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, a.int_or(0, 4))), ' ');
  const std::vector<std::string> lines = py::splitlines(v.str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent_line = i > 0 && (a.bool_or(2, false) || !lines[i].empty());
    if (indent_line) out += indention;
    out += lines[i];
  }
  if (a.bool_or(1, false)) out = indention + out;
  in.check_size(out.size());
  return out;
}

Value f_center(Interpreter&, const Value& v, Args& args) {
  ArgBinder a("center", args, {"width"});
  const std::string s = v.str();
  const int64_t width = a.int_or(0, 80);
  const int64_t n = static_cast<int64_t>(py::length(s));
  if (width <= n || width > (1 << 20)) return s;
  const int64_t margin = width - n;
  const int64_t left = margin / 2 + (margin & width & 1);  // CPython's str.center
  return std::string(static_cast<size_t>(left), ' ') + s +
         std::string(static_cast<size_t>(margin - left), ' ');
}

Value f_wordcount(Interpreter&, const Value& v, Args& args) {
  ArgBinder("wordcount", args, {});
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : py::decode(v.str())) {
    const bool word_char =
        c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : !py::is_space(c));
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return words;
}

Value f_safe(Interpreter&, const Value& v, Args& args) {
  ArgBinder("safe", args, {});
  return v;
}

Value f_escape(Interpreter&, const Value& v, Args& args) {
  ArgBinder("escape", args, {});
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value f_attr(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("attr", args, {"name"});
  const std::string name = a.required(0).str();
  Value method;
  if (find_method(v, name, &method)) return method;
  if (v.is_namespace()) {
    if (const Value* found = v.as_namespace().find(name)) return *found;
  }
  if (v.is_undefined()) return in.get_attr(v, name);  // raises
  return Value::undefined(cat("'", v.type_name(), " object' has no attribute '", name, "'"));
}

Value f_format(Interpreter& in, const Value& v, Args& args) {
  if (!args.keyword.empty()) type_error("format() with keyword arguments is not supported");
  std::string out = printf_format(v.str(), args.positional);
  in.check_size(out.size());
  return out;
}

}  // namespace

// Collection filters (sort, map, select, ...) are in jinja_filters_seq.cpp.
void register_sequence_filters(std::unordered_map<std::string_view, FilterFn>& table);

FilterFn find_filter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFn> table = [] {
    std::unordered_map<std::string_view, FilterFn> t = {
        {"length", f_length},
        {"count", f_length},
        {"string", f_string},
        {"trim", f_trim},
        {"upper", f_upper},
        {"lower", f_lower},
        {"title", f_title},
        {"capitalize", f_capitalize},
        {"replace", f_replace},
        {"default", f_default},
        {"d", f_default},
        {"first", f_first},
        {"last", f_last},
        {"list", f_list},
        {"join", f_join},
        {"reverse", f_reverse},
        {"items", f_items},
        {"tojson", f_tojson},
        {"int", f_int},
        {"float", f_float},
        {"abs", f_abs},
        {"round", f_round},
        {"indent", f_indent},
        {"center", f_center},
        {"wordcount", f_wordcount},
        {"safe", f_safe},
        {"escape", f_escape},
        {"e", f_escape},
        {"forceescape", f_escape},
        {"attr", f_attr},
        {"format", f_format},
    };
    register_sequence_filters(t);
    return t;
  }();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace tokamak::jinja
