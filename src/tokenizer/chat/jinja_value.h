#pragma once
// The values of the Jinja subset that chat templates use, with Python's semantics (the
// templates are written against Jinja2 on CPython, so truthiness, equality, ordering and
// printing follow Python's rules).
//
// A Value is cheap to copy: scalars and strings are held inline; lists and dicts are shared
// and immutable once built (as in transformers' ImmutableSandboxedEnvironment, which forbids
// list.append and friends); a namespace is the one mutable object, changed only by
// `{% set ns.attr = ... %}`.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tokamak::jinja {

class Value;
class Interpreter;

using List = std::vector<Value>;
struct Dict;
struct Namespace;

// Arguments of a call, filter or test, after evaluation.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A function value: a global (range, namespace, ...), a bound method ("a".upper) or a macro.
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() : data_(UndefinedData{}) {}  // undefined
  static Value undefined(std::string hint) { return Value(UndefinedData{std::move(hint)}); }
  static Value none() { return Value(std::monostate{}); }
  Value(bool b) : data_(b) {}
  Value(int v) : data_(static_cast<int64_t>(v)) {}
  Value(int64_t v) : data_(v) {}
  Value(double v) : data_(v) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(std::string_view s) : data_(std::string(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(List items, bool is_tuple = false);
  Value(Dict dict);
  Value(std::shared_ptr<Namespace> ns);
  Value(std::shared_ptr<const Callable> fn) : data_(std::move(fn)) {}

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_tuple() const { return is_list() && is_tuple_; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  const std::string& undefined_hint() const { return std::get<UndefinedData>(data_).hint; }

  // An integral number (bool or int) as int64; a precondition that is_bool() || is_int().
  int64_t to_int() const { return is_bool() ? (as_bool() ? 1 : 0) : as_int(); }
  // Any number as double; a precondition that is_number().
  double to_double() const { return is_float() ? as_float() : static_cast<double>(to_int()); }

  // Python's bool(x); undefined is false.
  bool truthy() const;
  // Python's str(x) as Jinja prints it: undefined prints as "", None as "None".
  std::string str() const;
  // Python's repr(x), used for items inside printed lists and dicts.
  std::string repr() const;
  // Python's type name for error messages ("str", "int", "NoneType", ...).
  std::string type_name() const;

  // Python's ==: numbers compare by value across bool/int/float, containers elementwise.
  friend bool operator==(const Value& a, const Value& b);

  // Nesting depth of lists/dicts/namespaces (0 for scalars). Building a value nested deeper
  // than kMaxDepth throws, so printing, comparing and destroying values cannot exhaust the
  // stack however a template loops.
  static constexpr int kMaxDepth = 256;
  int depth() const { return depth_; }

 private:
  struct UndefinedData {
    std::string hint;  // what was undefined, for the error when it is used: "'x' is undefined"
  };
  explicit Value(UndefinedData d) : data_(std::move(d)) {}
  explicit Value(std::monostate m) : data_(m) {}

  // Order matches Kind.
  std::variant<UndefinedData, std::monostate, bool, int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Callable>>
      data_;
  bool is_tuple_ = false;
  uint16_t depth_ = 0;
};

// An insertion-ordered mapping (Python dicts keep insertion order, which tojson and
// `for k, v in d.items()` make visible). Lookups are linear: template dicts are small.
struct Dict {
  std::vector<std::pair<Value, Value>> items;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts or replaces, keeping the first insertion's position (Python semantics).
  void set(Value key, Value value);
};

// The object namespace(...) returns; attributes are assignable with {% set ns.x = ... %}.
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;

  const Value* find(std::string_view name) const;
  // Throws when `value` contains this namespace (a cycle) or nests too deeply.
  void set(std::string_view name, Value value);
};

// Python's a < b for the types that define it (numbers, strings, lists); throws Error
// naming both types otherwise.
bool less_than(const Value& a, const Value& b);

}  // namespace tokamak::jinja
