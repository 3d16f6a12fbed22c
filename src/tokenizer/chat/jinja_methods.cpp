// Methods of str, dict and list that templates call (`content.strip()`, `d.items()`), with
// Python's semantics. As in transformers' ImmutableSandboxedEnvironment, methods that would
// mutate a list or dict exist but refuse to run.

#include <unordered_map>

#include "tokenizer/chat/jinja_builtins.h"
#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

using Args = CallArgs;
using MethodFn = Value (*)(Interpreter&, const Value& self, Args&);

std::optional<std::string> optional_string(const ArgBinder& a, size_t i) {
  if (!a.get(i) || a.get(i)->is_none()) return std::nullopt;
  return a.string_or(i, "");
}

Value m_strip(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("strip", args, {"chars"});
  return py::strip(s.as_string(), optional_string(a, 0), true, true);
}
Value m_lstrip(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("lstrip", args, {"chars"});
  return py::strip(s.as_string(), optional_string(a, 0), true, false);
}
Value m_rstrip(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("rstrip", args, {"chars"});
  return py::strip(s.as_string(), optional_string(a, 0), false, true);
}

Value split_impl(const Value& s, Args& args, bool from_right) {
  ArgBinder a(from_right ? "rsplit" : "split", args, {"sep", "maxsplit"});
  const std::optional<std::string> sep = optional_string(a, 0);
  if (sep && sep->empty()) type_error("empty separator");
  List parts;
  for (std::string& p : py::split(s.as_string(), sep, a.int_or(1, -1), from_right))
    parts.emplace_back(std::move(p));
  return Value(std::move(parts));
}
Value m_split(Interpreter&, const Value& s, Args& args) {
  return split_impl(s, args, false);
}
Value m_rsplit(Interpreter&, const Value& s, Args& args) {
  return split_impl(s, args, true);
}

Value m_splitlines(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("splitlines", args, {"keepends"});
  if (a.bool_or(0, false)) type_error("splitlines(keepends=True) is not supported");
  List lines;
  for (std::string& line : py::splitlines(s.as_string())) lines.emplace_back(std::move(line));
  return Value(std::move(lines));
}

Value m_upper(Interpreter&, const Value& s, Args& args) {
  ArgBinder("upper", args, {});
  return py::upper(s.as_string());
}
Value m_lower(Interpreter&, const Value& s, Args& args) {
  ArgBinder("lower", args, {});
  return py::lower(s.as_string());
}
Value m_title(Interpreter&, const Value& s, Args& args) {
  ArgBinder("title", args, {});
  return py::title_method(s.as_string());
}
Value m_capitalize(Interpreter&, const Value& s, Args& args) {
  ArgBinder("capitalize", args, {});
  return py::capitalize(s.as_string());
}

Value m_replace(Interpreter& in, const Value& s, Args& args) {
  ArgBinder a("replace", args, {"old", "new", "count"});
  a.required(0);
  a.required(1);
  std::string out =
      py::replace(s.as_string(), a.string_or(0, ""), a.string_or(1, ""), a.int_or(2, -1));
  in.check_size(out.size());
  return out;
}

Value affix_impl(const Value& s, Args& args, bool prefix) {
  ArgBinder a(prefix ? "startswith" : "endswith", args, {"affix"});
  const Value& affix = a.required(0);
  auto matches = [&](const Value& candidate) {
    if (!candidate.is_string())
      type_error("startswith/endswith first arg must be str or a tuple of str");
    const std::string& text = s.as_string();
    const std::string& x = candidate.as_string();
    if (x.size() > text.size()) return false;
    return prefix ? text.compare(0, x.size(), x) == 0
                  : text.compare(text.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_tuple()) {
    for (const Value& candidate : affix.as_list()) {
      if (matches(candidate)) return true;
    }
    return false;
  }
  return matches(affix);
}
Value m_startswith(Interpreter&, const Value& s, Args& args) {
  return affix_impl(s, args, true);
}
Value m_endswith(Interpreter&, const Value& s, Args& args) {
  return affix_impl(s, args, false);
}

Value m_find(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("find", args, {"sub"});
  return py::find(s.as_string(), a.required(0).str(), false);
}
Value m_rfind(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("rfind", args, {"sub"});
  return py::find(s.as_string(), a.required(0).str(), true);
}
Value m_str_count(Interpreter&, const Value& s, Args& args) {
  ArgBinder a("count", args, {"sub"});
  return py::count(s.as_string(), a.required(0).str());
}

Value m_join(Interpreter& in, const Value& s, Args& args) {
  ArgBinder a("join", args, {"iterable"});
  std::string out;
  size_t i = 0;
  for (const Value& item : in.iterate(a.required(0))) {
    if (!item.is_string()) {
      type_error("sequence item " + std::to_string(i) + ": expected str instance, " +
                 item.type_name() + " found");
    }
    if (i++ > 0) out += s.as_string();
    out += item.as_string();
    in.check_size(out.size());
  }
  return out;
}

// str.format with {} / {0} / {name} fields, !s / !r conversions and {{ }} escapes; format
// specs (":>10") are not supported.
Value m_format(Interpreter& in, const Value& s, Args& args) {
  const std::string& f = s.as_string();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}')
        ++i;
      else
        type_error("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) type_error("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 's';
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos)
      type_error("format specs in str.format are not supported");
    const Value* arg = nullptr;
    if (field.empty() || (field[0] >= '0' && field[0] <= '9')) {
      const size_t index = field.empty() ? auto_index++ : static_cast<size_t>(std::stoul(field));
      if (index >= args.positional.size())
        type_error("Replacement index " + std::to_string(index) + " out of range");
      arg = &args.positional[index];
    } else {
      for (const auto& [key, value] : args.keyword) {
        if (key == field) arg = &value;
      }
      if (!arg) type_error("KeyError: '" + field + "'");
    }
    out += conversion == 'r' ? arg->repr() : arg->str();
    in.check_size(out.size());
  }
  return out;
}

template <bool (*Pred)(char32_t)>
Value char_class(const Value& s, Args& args, const char* name) {
  ArgBinder(name, args, {});
  const std::u32string text = py::decode(s.as_string());
  if (text.empty()) return false;
  for (char32_t c : text) {
    if (!Pred(c)) return false;
  }
  return true;
}
bool is_digit_cp(char32_t c) {
  return c >= '0' && c <= '9';
}
bool is_alpha_cp(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && !py::is_space(c));
}
bool is_alnum_cp(char32_t c) {
  return is_digit_cp(c) || is_alpha_cp(c);
}
Value m_isdigit(Interpreter&, const Value& s, Args& args) {
  return char_class<is_digit_cp>(s, args, "isdigit");
}
Value m_isalpha(Interpreter&, const Value& s, Args& args) {
  return char_class<is_alpha_cp>(s, args, "isalpha");
}
Value m_isalnum(Interpreter&, const Value& s, Args& args) {
  return char_class<is_alnum_cp>(s, args, "isalnum");
}
Value m_isspace(Interpreter&, const Value& s, Args& args) {
  return char_class<py::is_space>(s, args, "isspace");
}
Value m_islower(Interpreter&, const Value& s, Args& args) {
  ArgBinder("islower", args, {});
  return py::is_lower(s.as_string());
}
Value m_isupper(Interpreter&, const Value& s, Args& args) {
  ArgBinder("isupper", args, {});
  return py::is_upper(s.as_string());
}

Value m_items(Interpreter&, const Value& d, Args& args) {
  ArgBinder("items", args, {});
  List pairs;
  for (const auto& [k, v] : d.as_dict().items) pairs.emplace_back(List{k, v}, true);
  return Value(std::move(pairs));
}
Value m_keys(Interpreter&, const Value& d, Args& args) {
  ArgBinder("keys", args, {});
  List keys;
  for (const auto& item : d.as_dict().items) keys.push_back(item.first);
  return Value(std::move(keys));
}
Value m_values(Interpreter&, const Value& d, Args& args) {
  ArgBinder("values", args, {});
  List values;
  for (const auto& item : d.as_dict().items) values.push_back(item.second);
  return Value(std::move(values));
}
Value m_get(Interpreter&, const Value& d, Args& args) {
  ArgBinder a("get", args, {"key", "default"});
  const Value* found = d.as_dict().find(a.required(0));
  return found ? *found : a.get_or(1, Value::none());
}

Value m_index(Interpreter&, const Value& l, Args& args) {
  ArgBinder a("index", args, {"value"});
  const List& items = l.as_list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i] == a.required(0)) return static_cast<int64_t>(i);
  }
  type_error(a.required(0).repr() + " is not in list");
}
Value m_list_count(Interpreter&, const Value& l, Args& args) {
  ArgBinder a("count", args, {"value"});
  int64_t n = 0;
  for (const Value& item : l.as_list()) n += item == a.required(0) ? 1 : 0;
  return n;
}

bool is_mutator(Value::Kind kind, std::string_view name) {
  static const std::string_view kList[] = {"append", "clear",  "extend",  "insert",
                                           "pop",    "remove", "reverse", "sort"};
  static const std::string_view kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (kind == Value::Kind::List)
    return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  if (kind == Value::Kind::Dict)
    return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  return false;
}

}  // namespace

bool find_method(const Value& self, std::string_view name, Value* method) {
  static const std::unordered_map<std::string_view, MethodFn> kStr = {
      {"strip", m_strip},           {"lstrip", m_lstrip},   {"rstrip", m_rstrip},
      {"split", m_split},           {"rsplit", m_rsplit},   {"splitlines", m_splitlines},
      {"upper", m_upper},           {"lower", m_lower},     {"title", m_title},
      {"capitalize", m_capitalize}, {"replace", m_replace}, {"startswith", m_startswith},
      {"endswith", m_endswith},     {"find", m_find},       {"rfind", m_rfind},
      {"count", m_str_count},       {"join", m_join},       {"format", m_format},
      {"isdigit", m_isdigit},       {"isalpha", m_isalpha}, {"isalnum", m_isalnum},
      {"isspace", m_isspace},       {"islower", m_islower}, {"isupper", m_isupper},
  };
  static const std::unordered_map<std::string_view, MethodFn> kDict = {
      {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"get", m_get}};
  static const std::unordered_map<std::string_view, MethodFn> kList = {{"index", m_index},
                                                                       {"count", m_list_count}};

  const std::unordered_map<std::string_view, MethodFn>* table = self.is_string() ? &kStr
                                                                : self.is_dict() ? &kDict
                                                                : self.is_list() ? &kList
                                                                                 : nullptr;
  if (!table) return false;
  if (is_mutator(self.kind(), name)) {
    const std::string message = "access to attribute '" + std::string(name) + "' of '" +
                                self.type_name() +
                                "' object is unsafe (templates cannot modify lists or dicts)";
    *method = Value(std::make_shared<const Callable>(
        Callable{std::string(name),
                 [message](Interpreter&, CallArgs&) -> Value { throw RenderError(message); }}));
    return true;
  }
  const auto it = table->find(name);
  if (it == table->end()) return false;
  const MethodFn fn = it->second;
  *method = Value(std::make_shared<const Callable>(
      Callable{std::string(name),
               [fn, self](Interpreter& in, CallArgs& args) { return fn(in, self, args); }}));
  return true;
}

}  // namespace tokamak::jinja
