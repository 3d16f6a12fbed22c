// Jinja's built-in tests (`x is defined`, `n is divisibleby 3`, ...), with Python's type
// rules: bool counts as a number but not as an integer.

#include <unordered_map>

#include "tokenizer/chat/jinja_builtins.h"
#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_operators.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

using Args = CallArgs;

void no_args(const char* name, const Args& args) {
  ArgBinder(name, args, {});
}

const Value& one_arg(const char* name, const Args& args) {
  ArgBinder a(name, args, {"other"});
  return a.required(0);
}

bool t_defined(Interpreter&, const Value& v, Args& a) {
  no_args("defined", a);
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, Args& a) {
  no_args("undefined", a);
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, Args& a) {
  no_args("none", a);
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, Args& a) {
  no_args("boolean", a);
  return v.is_bool();
}
bool t_true(Interpreter&, const Value& v, Args& a) {
  no_args("true", a);
  return v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, Args& a) {
  no_args("false", a);
  return v.is_bool() && !v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, Args& a) {
  no_args("integer", a);
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, Args& a) {
  no_args("float", a);
  return v.is_float();
}
bool t_number(Interpreter&, const Value& v, Args& a) {
  no_args("number", a);
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, Args& a) {
  no_args("string", a);
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, Args& a) {
  no_args("mapping", a);
  return v.is_dict();
}
bool t_callable(Interpreter&, const Value& v, Args& a) {
  no_args("callable", a);
  return v.is_callable();
}
bool t_escaped(Interpreter&, const Value&, Args& a) {
  no_args("escaped", a);
  return false;
}

bool t_iterable(Interpreter&, const Value& v, Args& a) {
  no_args("iterable", a);
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}

bool t_sequence(Interpreter&, const Value& v, Args& a) {
  no_args("sequence", a);
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}

bool t_odd(Interpreter& in, const Value& v, Args& a) {
  no_args("odd", a);
  return binary_op(in, BinaryOp::Mod, v, Value(2)) == Value(1);
}

bool t_even(Interpreter& in, const Value& v, Args& a) {
  no_args("even", a);
  return binary_op(in, BinaryOp::Mod, v, Value(2)) == Value(0);
}

bool t_divisibleby(Interpreter& in, const Value& v, Args& a) {
  ArgBinder b("divisibleby", a, {"num"});
  const Value rem = binary_op(in, BinaryOp::Mod, v, b.required(0));
  return rem == Value(0);
}

bool t_lower(Interpreter&, const Value& v, Args& a) {
  no_args("lower", a);
  return py::is_lower(v.str());
}
bool t_upper(Interpreter&, const Value& v, Args& a) {
  no_args("upper", a);
  return py::is_upper(v.str());
}

bool t_eq(Interpreter&, const Value& v, Args& a) {
  return compare_op(CompareOp::Eq, v, one_arg("eq", a));
}
bool t_ne(Interpreter&, const Value& v, Args& a) {
  return compare_op(CompareOp::Ne, v, one_arg("ne", a));
}
bool t_lt(Interpreter&, const Value& v, Args& a) {
  return compare_op(CompareOp::Lt, v, one_arg("lt", a));
}
bool t_le(Interpreter&, const Value& v, Args& a) {
  return compare_op(CompareOp::Le, v, one_arg("le", a));
}
bool t_gt(Interpreter&, const Value& v, Args& a) {
  return compare_op(CompareOp::Gt, v, one_arg("gt", a));
}
bool t_ge(Interpreter&, const Value& v, Args& a) {
  return compare_op(CompareOp::Ge, v, one_arg("ge", a));
}
bool t_in(Interpreter&, const Value& v, Args& a) {
  return contains(one_arg("in", a), v);
}

bool t_sameas(Interpreter&, const Value& v, Args& a) {
  // Python identity: singletons and small scalars compare by value, containers by object.
  const Value& other = one_arg("sameas", a);
  if (v.kind() != other.kind()) return false;
  if (v.is_list()) return &v.as_list() == &other.as_list();
  if (v.is_dict()) return &v.as_dict() == &other.as_dict();
  return v == other;
}

bool t_filter(Interpreter&, const Value& v, Args& a) {
  no_args("filter", a);
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, Args& a) {
  no_args("test", a);
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"escaped", t_escaped},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"lower", t_lower},
      {"upper", t_upper},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"filter", t_filter},
      {"test", t_test},
  };
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace tokamak::jinja
