#pragma once
// The built-in filters, tests, methods and global functions of the engine, and the argument
// binding they share. Each family lives in its own file: jinja_filters.cpp,
// jinja_tests.cpp, jinja_methods.cpp, jinja_globals.cpp.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat/jinja_eval.h"
#include "tokenizer/chat/jinja_value.h"

namespace tokamak::jinja {

using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

// nullptr when there is no such filter / test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// A bound method of a str, dict or list (`"a".upper`, `d.items`); undefined-free: returns
// false when the type has no such method.
bool find_method(const Value& self, std::string_view name, Value* method);

// range, namespace, dict, raise_exception, strftime_now, ...; nullptr when unknown.
const Value* find_global(std::string_view name);

// Binds call arguments to a Python-style parameter list:
//   ArgBinder a("replace", args, {"old", "new", "count"});
//   a.required(0); a.get(2) /* nullptr when not given */;
class ArgBinder {
 public:
  ArgBinder(std::string_view function, const CallArgs& args,
            std::initializer_list<std::string_view> params);

  const Value* get(size_t index) const { return bound_[index]; }
  const Value& required(size_t index) const;
  Value get_or(size_t index, Value fallback) const {
    return bound_[index] ? *bound_[index] : std::move(fallback);
  }
  // Typed accessors that name the function and parameter in their error.
  int64_t int_or(size_t index, int64_t fallback) const;
  bool bool_or(size_t index, bool fallback) const;
  std::string string_or(size_t index, std::string fallback) const;

 private:
  std::string function_;
  std::vector<std::string_view> params_;
  std::vector<const Value*> bound_;
};

// Shared helpers.
[[noreturn]] void type_error(const std::string& message);
int64_t require_int(const Value& v, std::string_view what);
// The attribute path getter Jinja's sort/map/selectattr/unique use: "a.b.0".
Value get_attribute_path(Interpreter& in, const Value& item, std::string_view path);
// Python's json.dumps with transformers' defaults (ensure_ascii=False, insertion order).
std::string to_json(const Value& v, bool ensure_ascii, const Value& indent,
                    std::string_view item_sep, std::string_view key_sep, bool sort_keys);

}  // namespace tokamak::jinja
