#include "tokenizer/chat/jinja_value.h"

#include <algorithm>

#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

uint16_t depth_above(int deepest_child) {
  if (deepest_child + 1 > Value::kMaxDepth) {
    throw RenderError("value nested more than " + std::to_string(Value::kMaxDepth) +
                      " levels deep");
  }
  return static_cast<uint16_t>(deepest_child + 1);
}

}  // namespace

Value::Value(List items, bool is_tuple) : is_tuple_(is_tuple) {
  int deepest = 0;
  for (const Value& v : items) deepest = std::max(deepest, v.depth());
  depth_ = depth_above(deepest);
  data_ = std::make_shared<const List>(std::move(items));
}

Value::Value(Dict dict) {
  int deepest = 0;
  for (const auto& [k, v] : dict.items) deepest = std::max({deepest, k.depth(), v.depth()});
  depth_ = depth_above(deepest);
  data_ = std::make_shared<const Dict>(std::move(dict));
}

Value::Value(std::shared_ptr<Namespace> ns) {
  int deepest = 0;
  for (const auto& attr : ns->attrs) deepest = std::max(deepest, attr.second.depth());
  depth_ = depth_above(deepest);
  data_ = std::move(ns);
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_float() != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::List:
      return !as_list().empty();
    case Kind::Dict:
      return !as_dict().items.empty();
    case Kind::Namespace:
    case Kind::Callable:
      return true;
  }
  return false;
}

namespace {

std::string join_repr(const List& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i].repr();
  }
  return out;
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return as_bool() ? "True" : "False";
    case Kind::Int:
      return std::to_string(as_int());
    case Kind::Float:
      return py::float_repr(as_float());
    case Kind::String:
      return as_string();
    case Kind::List:
      if (is_tuple_) {
        return cat("(", join_repr(as_list()), as_list().size() == 1 ? ",)" : ")");
      }
      return cat("[", join_repr(as_list()), "]");
    case Kind::Dict: {
      std::string out = "{";
      const auto& items = as_dict().items;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += items[i].first.repr() + ": " + items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::Namespace: {
      std::string out = "<Namespace {";
      const auto& attrs = as_namespace().attrs;
      for (size_t i = 0; i < attrs.size(); ++i) {
        if (i > 0) out += ", ";
        out += py::repr(attrs[i].first) + ": " + attrs[i].second.repr();
      }
      return out + "}>";
    }
    case Kind::Callable:
      return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string Value::repr() const {
  if (is_string()) return py::repr(as_string());
  if (is_undefined()) return "Undefined";
  return str();
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return is_tuple_ ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Callable:
      return "function";
  }
  return "object";
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.to_int() == b.to_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      // Python: a list never equals a tuple.
      if (a.is_tuple() != b.is_tuple()) return false;
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!(x[i] == y[i])) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [key, value] : x.items) {
        const Value* other = y.find(key);
        if (!other || !(*other == value)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace:
      return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::Callable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
    return a.to_int() < b.to_int();
  }
  // UTF-8 byte order is code point order, which is how Python orders str.
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw RenderError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                    b.type_name() + "'");
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* Namespace::find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

// Whether `v` holds `ns` anywhere inside it (a namespace may hold itself only via a cycle,
// which would leak and recurse forever when printed).
bool holds(const Value& v, const Namespace* ns, int depth) {
  if (depth > Value::kMaxDepth) throw RenderError("value nested too deeply");
  switch (v.kind()) {
    case Value::Kind::Namespace:
      if (&v.as_namespace() == ns) return true;
      for (const auto& attr : v.as_namespace().attrs) {
        if (holds(attr.second, ns, depth + 1)) return true;
      }
      return false;
    case Value::Kind::List:
      for (const Value& item : v.as_list()) {
        if (holds(item, ns, depth + 1)) return true;
      }
      return false;
    case Value::Kind::Dict:
      for (const auto& [k, item] : v.as_dict().items) {
        if (holds(item, ns, depth + 1)) return true;
      }
      return false;
    default:
      return false;
  }
}

}  // namespace

void Namespace::set(std::string_view name, Value value) {
  if (value.depth() + 1 > Value::kMaxDepth) throw RenderError("value nested too deeply");
  if (holds(value, this, 0)) throw RenderError("a namespace cannot contain itself");
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(std::string(name), std::move(value));
}

}  // namespace tokamak::jinja
