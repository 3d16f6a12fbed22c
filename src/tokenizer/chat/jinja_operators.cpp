#include "tokenizer/chat/jinja_operators.h"

#include <cmath>
#include <optional>

#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_eval.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

const char* symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "+";
    case BinaryOp::Sub:
      return "-";
    case BinaryOp::Mul:
      return "*";
    case BinaryOp::Div:
      return "/";
    case BinaryOp::FloorDiv:
      return "//";
    case BinaryOp::Mod:
      return "%";
    case BinaryOp::Pow:
      return "** or pow()";
    case BinaryOp::Concat:
      return "~";
    case BinaryOp::And:
      return "and";
    case BinaryOp::Or:
      return "or";
  }
  return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  throw RenderError(std::string("unsupported operand type(s) for ") + symbol(op) + ": '" +
                    a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow() {
  throw RenderError("integer overflow");
}

Value int_op(BinaryOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::Add:
      if (__builtin_add_overflow(x, y, &r)) overflow();
      return r;
    case BinaryOp::Sub:
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return r;
    case BinaryOp::Mul:
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return r;
    case BinaryOp::Div:
      if (y == 0) throw RenderError("division by zero");
      return static_cast<double>(x) / static_cast<double>(y);
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: {
      if (y == 0) throw RenderError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward negative infinity
        --q;
        m += y;
      }
      return op == BinaryOp::FloorDiv ? q : m;
    }
    case BinaryOp::Pow: {
      if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
      int64_t result = 1;
      int64_t base = x;
      for (int64_t e = y; e > 0;) {  // square-and-multiply, overflow-checked
        if ((e & 1) && __builtin_mul_overflow(result, base, &result)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return result;
    }
    default:
      break;
  }
  return Value();
}

Value float_op(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::Add:
      return x + y;
    case BinaryOp::Sub:
      return x - y;
    case BinaryOp::Mul:
      return x * y;
    case BinaryOp::Div:
      if (y == 0.0) throw RenderError("float division by zero");
      return x / y;
    case BinaryOp::FloorDiv:
      if (y == 0.0) throw RenderError("float floor division by zero");
      return std::floor(x / y);
    case BinaryOp::Mod: {
      if (y == 0.0) throw RenderError("float modulo");
      double m = std::fmod(x, y);
      if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
      return m;
    }
    case BinaryOp::Pow:
      return std::pow(x, y);
    default:
      break;
  }
  return Value();
}

Value repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value("") : Value(List{}, seq.is_tuple());
  if (seq.is_string()) {
    in.check_size(seq.as_string().size() * static_cast<size_t>(times));
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return out;
  }
  in.check_size(seq.as_list().size() * static_cast<size_t>(times));
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out), seq.is_tuple());
}

}  // namespace

std::string printf_format(const std::string& format, const List& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (i + 1 >= format.size()) throw RenderError("incomplete format");
    const char conv = format[++i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (conv != 's' && conv != 'r' && conv != 'd' && conv != 'i') {
      throw RenderError(std::string("'%' formatting supports %s, %r, %d and %%, not %") + conv);
    }
    if (next >= args.size()) throw RenderError("not enough arguments for format string");
    const Value& arg = args[next++];
    if (conv == 's') {
      out += arg.str();
    } else if (conv == 'r') {
      out += arg.repr();
    } else if (arg.is_int() || arg.is_bool()) {
      out += std::to_string(arg.to_int());
    } else if (arg.is_float() && std::isfinite(arg.as_float()) &&
               std::fabs(arg.as_float()) < 9.2e18) {
      out += std::to_string(static_cast<int64_t>(arg.as_float()));
    } else {
      throw RenderError("%d format: a real number is required, not " + arg.type_name());
    }
  }
  if (next < args.size()) throw RenderError("not all arguments converted during string formatting");
  return out;
}

Value binary_op(Interpreter& in, BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::Concat) {
    std::string s = a.str() + b.str();
    in.check_size(s.size());
    return s;
  }
  if (a.is_undefined()) throw RenderError(a.undefined_hint());
  if (b.is_undefined()) throw RenderError(b.undefined_hint());
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return float_op(op, a.to_double(), b.to_double());
    return int_op(op, a.to_int(), b.to_int());
  }
  if (op == BinaryOp::Add) {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size());
      return a.as_string() + b.as_string();
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      in.check_size(a.as_list().size() + b.as_list().size());
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out), a.is_tuple());
    }
  }
  if (op == BinaryOp::Mul) {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
      return repeat(in, a, b.to_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
      return repeat(in, b, a.to_int());
  }
  if (op == BinaryOp::Mod && a.is_string()) {
    std::string out = printf_format(a.as_string(), b.is_tuple() ? b.as_list() : List{b});
    in.check_size(out.size());
    return out;
  }
  unsupported(op, a, b);
}

bool compare_op(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::Eq:
      return a == b;
    case CompareOp::Ne:
      return !(a == b);
    case CompareOp::Lt:
      return less_than(a, b);
    case CompareOp::Le:
      return less_than(a, b) || a == b;
    case CompareOp::Gt:
      return less_than(b, a);
    case CompareOp::Ge:
      return less_than(b, a) || a == b;
    case CompareOp::In:
      return contains(b, a);
    case CompareOp::NotIn:
      return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined:
      return false;  // iterates as empty
    case Value::Kind::String:
      if (!item.is_string()) {
        throw RenderError("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.as_list()) {
        if (v == item) return true;
      }
      return false;
    case Value::Kind::Dict:
      return container.as_dict().find(item) != nullptr;
    default:
      throw RenderError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value negate(const Value& v) {
  if (v.is_undefined()) throw RenderError(v.undefined_hint());
  if (v.is_float()) return -v.as_float();
  if (v.is_int() || v.is_bool()) {
    if (v.to_int() == INT64_MIN) overflow();
    return -v.to_int();
  }
  throw RenderError("bad operand type for unary -: '" + v.type_name() + "'");
}

Value slice_value(const Value& seq, const Value& start, const Value& stop, const Value& step) {
  if (seq.is_undefined()) throw RenderError(seq.undefined_hint());
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (v.is_int() || v.is_bool()) return v.to_int();
    throw RenderError(std::string("slice ") + what + " must be an integer or None");
  };
  const int64_t st = bound(step, "step").value_or(1);
  if (st == 0) throw RenderError("slice step cannot be zero");
  std::u32string text;
  int64_t len = 0;
  if (seq.is_string()) {
    text = py::decode(seq.as_string());
    len = static_cast<int64_t>(text.size());
  } else if (seq.is_list()) {
    len = static_cast<int64_t>(seq.as_list().size());
  } else {
    return Value::undefined(cat("'", seq.type_name(), " object' is not subscriptable"));
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t if_absent) {
    if (!v) return if_absent;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= len) {
      x = st < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t b = adjust(bound(start, "start"), st < 0 ? len - 1 : 0);
  const int64_t e = adjust(bound(stop, "stop"), st < 0 ? -1 : len);
  std::vector<int64_t> picks;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) picks.push_back(i);
  if (seq.is_string()) {
    std::u32string out;
    for (int64_t i : picks) out.push_back(text[static_cast<size_t>(i)]);
    return py::encode(out);
  }
  List out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(seq.as_list()[static_cast<size_t>(i)]);
  return Value(std::move(out), seq.is_tuple());
}

}  // namespace tokamak::jinja
