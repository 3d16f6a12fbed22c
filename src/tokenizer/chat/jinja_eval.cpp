#include "tokenizer/chat/jinja_eval.h"

#include <chrono>

#include "tokenizer/chat/jinja_builtins.h"
#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_operators.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

struct Interpreter::Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;  // enclosing scope; null for the top level

  Value* find(std::string_view name) {
    for (auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

namespace {

// Restores a member to its old value when a scope ends, also on errors.
template <typename T>
class Restore {
 public:
  Restore(T& slot, T value) : slot_(slot), saved_(std::move(slot)) { slot_ = std::move(value); }
  ~Restore() { slot_ = std::move(saved_); }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T& slot_;
  T saved_;
};

std::string where(int line, int column) {
  return " at line " + std::to_string(line) + ", column " + std::to_string(column);
}

[[noreturn]] void relocate(const RenderError& err, int line, int column) {
  throw RenderError("chat template: " + std::string(err.what()) + where(line, column), true);
}

// Python's error text for a missing attribute or element, as Jinja's Undefined words it.
std::string object_name(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

}  // namespace

Interpreter::Interpreter(const RenderOptions& options) : options_(options) {}
Interpreter::~Interpreter() {
  frame_.reset();
  for (const auto& weak : namespaces_) {
    if (auto ns = weak.lock()) {
      auto attrs = std::move(ns->attrs);  // released after `ns`'s own reference is dropped
      ns.reset();
    }
  }
}

std::string Interpreter::render(const Body& body,
                                std::vector<std::pair<std::string, Value>> context) {
  frame_ = std::make_shared<Frame>();
  frame_->vars = std::move(context);
  std::string out;
  out_ = &out;
  exec_body(body);
  out_ = nullptr;
  frame_.reset();
  return out;
}

// ---------------------------------------------------------------- statements

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const Stmt& stmt : body) {
    const Flow flow = exec(stmt);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt) {
  try {
    if (const auto* text = std::get_if<TextStmt>(&stmt.node)) {
      emit(text->text);
    } else if (const auto* e = std::get_if<EmitStmt>(&stmt.node)) {
      emit(eval(*e->expr).str());
    } else if (const auto* node = std::get_if<IfStmt>(&stmt.node)) {
      for (const auto& [cond, body] : node->branches) {
        if (eval(*cond).truthy()) return exec_body(body);
      }
      return exec_body(node->otherwise);
    } else if (const auto* loop = std::get_if<ForStmt>(&stmt.node)) {
      return exec_for(*loop);
    } else if (const auto* set = std::get_if<SetStmt>(&stmt.node)) {
      exec_set(*set);
    } else if (const auto* block = std::get_if<SetBlockStmt>(&stmt.node)) {
      auto scope = std::make_shared<Frame>();
      scope->parent = frame_;
      assign(block->target, capture(block->body, scope));
    } else if (const auto* macro = std::get_if<MacroStmt>(&stmt.node)) {
      assign(macro->name, make_macro(*macro));
    } else if (const auto* scoped = std::get_if<ScopeStmt>(&stmt.node)) {
      auto scope = std::make_shared<Frame>();
      scope->parent = frame_;
      Restore<std::shared_ptr<Frame>> enter(frame_, scope);
      return exec_body(scoped->body);
    } else if (std::holds_alternative<BreakStmt>(stmt.node)) {
      return Flow::Break;
    } else if (std::holds_alternative<ContinueStmt>(stmt.node)) {
      return Flow::Continue;
    }
  } catch (const RenderError& err) {
    if (err.located()) throw;
    relocate(err, stmt.line, stmt.column);
  }
  return Flow::Normal;
}

void Interpreter::emit(std::string_view text) {
  out_->append(text);
  check_size(out_->size());
}

namespace {

// Binds a for/set target list to one value, unpacking tuples as Python does.
template <typename AssignFn>
void bind_targets(Interpreter& in, const std::vector<std::string>& targets, const Value& value,
                  AssignFn assign_one) {
  if (targets.size() == 1) {
    assign_one(targets[0], value);
    return;
  }
  const List parts = in.iterate(value);
  if (parts.size() < targets.size()) {
    throw RenderError("not enough values to unpack (expected " + std::to_string(targets.size()) +
                      ", got " + std::to_string(parts.size()) + ")");
  }
  if (parts.size() > targets.size()) {
    throw RenderError("too many values to unpack (expected " + std::to_string(targets.size()) +
                      ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) assign_one(targets[i], parts[i]);
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const ForStmt& node) {
  List items = iterate(eval(*node.iterable));
  const std::shared_ptr<Frame> outer = frame_;
  auto new_scope = [&](const Value& item) {
    auto scope = std::make_shared<Frame>();
    scope->parent = outer;
    bind_targets(*this, node.targets, item, [&](const std::string& name, const Value& v) {
      scope->vars.emplace_back(name, v);
    });
    return scope;
  };
  if (node.filter) {  // filtered first: loop.length and loop.last count only kept items
    List kept;
    for (Value& item : items) {
      charge_iterations(1);
      Restore<std::shared_ptr<Frame>> enter(frame_, new_scope(item));
      if (eval(*node.filter).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto scope = std::make_shared<Frame>();
    scope->parent = outer;
    Restore<std::shared_ptr<Frame>> enter(frame_, scope);
    exec_body(node.otherwise);
    return Flow::Normal;
  }
  // loop.cycle(...) picks by the current index, shared by all iterations of this loop.
  auto index0 = std::make_shared<int64_t>(0);
  const Value cycle(std::make_shared<const Callable>(
      Callable{"cycle", [index0](Interpreter&, CallArgs& args) -> Value {
                 if (args.positional.empty()) throw RenderError("no items for cycling given");
                 return args.positional[static_cast<size_t>(*index0) % args.positional.size()];
               }}));
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    charge_iterations(1);
    *index0 = i;
    auto scope = new_scope(items[static_cast<size_t>(i)]);
    Dict loop;
    loop.items.reserve(13);
    loop.items.emplace_back("index", i + 1);
    loop.items.emplace_back("index0", i);
    loop.items.emplace_back("revindex", n - i);
    loop.items.emplace_back("revindex0", n - i - 1);
    loop.items.emplace_back("first", i == 0);
    loop.items.emplace_back("last", i == n - 1);
    loop.items.emplace_back("length", n);
    loop.items.emplace_back("depth", 1);
    loop.items.emplace_back("depth0", 0);
    loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)]
                                              : Value::undefined("there is no previous item"));
    loop.items.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                                  : Value::undefined("there is no next item"));
    loop.items.emplace_back("cycle", cycle);
    scope->vars.emplace_back("loop", Value(std::move(loop)));
    Restore<std::shared_ptr<Frame>> enter(frame_, std::move(scope));
    if (exec_body(node.body) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const SetStmt& node) {
  Value value = eval(*node.value);
  if (!node.attribute.empty()) {
    const Value target = lookup(node.targets[0]);
    if (!target.is_namespace())
      throw RenderError("cannot assign attribute on non-namespace object");
    target.as_namespace().set(node.attribute, std::move(value));
    return;
  }
  bind_targets(*this, node.targets, value,
               [&](const std::string& name, const Value& v) { assign(name, v); });
}

std::string Interpreter::capture(const Body& body, std::shared_ptr<Frame> scope) {
  std::string buffer;
  Restore<std::string*> redirect(out_, &buffer);
  Restore<std::shared_ptr<Frame>> enter(frame_, std::move(scope));
  exec_body(body);
  return buffer;
}

Value Interpreter::make_macro(const MacroStmt& node) {
  const MacroStmt* macro = &node;
  // The defining scope is held weakly: that scope holds the macro, and a strong reference
  // back would be a cycle that is never freed.
  std::weak_ptr<Frame> defining_scope = frame_;
  return Value(std::make_shared<const Callable>(
      Callable{node.name, [macro, defining_scope](Interpreter& in, CallArgs& args) -> Value {
                 std::shared_ptr<Frame> closure = defining_scope.lock();
                 if (!closure)
                   throw RenderError("macro '" + macro->name + "' called after its scope ended");
                 const auto& params = macro->params;
                 if (args.positional.size() > params.size()) {
                   throw RenderError("macro '" + macro->name + "' takes not more than " +
                                     std::to_string(params.size()) + " argument(s)");
                 }
                 if (++in.call_depth_ > in.options_.limits.max_call_depth) {
                   throw RenderError("macro calls nested deeper than " +
                                     std::to_string(in.options_.limits.max_call_depth));
                 }
                 auto scope = std::make_shared<Frame>();
                 scope->parent = closure;
                 for (const auto& [key, value] : args.keyword) {
                   bool known = false;
                   for (const auto& p : params) known = known || p.first == key;
                   if (!known)
                     throw RenderError("macro '" + macro->name + "' takes no keyword argument '" +
                                       key + "'");
                 }
                 Restore<std::shared_ptr<Frame>> enter(in.frame_, scope);
                 for (size_t i = 0; i < params.size(); ++i) {
                   const auto& [name, default_value] = params[i];
                   Value v = Value::undefined("'" + name + "' is undefined");
                   if (i < args.positional.size()) {
                     v = args.positional[i];
                   } else {
                     bool given = false;
                     for (const auto& [key, value] : args.keyword) {
                       if (key == name) {
                         v = value;
                         given = true;
                       }
                     }
                     if (!given && default_value) v = in.eval(*default_value);
                   }
                   scope->vars.emplace_back(name, std::move(v));
                 }
                 std::string result = in.capture(macro->body, scope);
                 --in.call_depth_;
                 return result;
               }}));
}

// ---------------------------------------------------------------- scopes

Value Interpreter::lookup(const std::string& name) const {
  for (Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    if (const Value* v = f->find(name)) return *v;
  }
  if (const Value* global = find_global(name)) return *global;
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::string& name, Value value) {
  if (Value* slot = frame_->find(name)) {
    *slot = std::move(value);
  } else {
    frame_->vars.emplace_back(name, std::move(value));
  }
}

// ---------------------------------------------------------------- services

Value Interpreter::get_attr(const Value& object, std::string_view name) {
  if (object.is_undefined()) throw RenderError(object.undefined_hint());
  Value method;
  if (find_method(object, name, &method)) return method;
  if (object.is_dict()) {
    if (const Value* v = object.as_dict().find(name)) return *v;
  } else if (object.is_namespace()) {
    if (const Value* v = object.as_namespace().find(name)) return *v;
  }
  return Value::undefined(cat("'", object_name(object), "' has no attribute '", name, "'"));
}

Value Interpreter::get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) throw RenderError(object.undefined_hint());
  if (object.is_dict()) {
    if (const Value* v = object.as_dict().find(key)) return *v;
  } else if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    const int64_t size = object.is_list() ? static_cast<int64_t>(object.as_list().size())
                                          : static_cast<int64_t>(py::length(object.as_string()));
    int64_t i = key.to_int();
    if (i < 0) i += size;
    if (i >= 0 && i < size) {
      if (object.is_list()) return object.as_list()[static_cast<size_t>(i)];
      return py::encode(std::u32string(1, py::decode(object.as_string())[static_cast<size_t>(i)]));
    }
    return Value::undefined(object_name(object) + " has no element " + key.repr());
  }
  if (key.is_string()) return get_attr(object, key.as_string());
  return Value::undefined(object_name(object) + " has no element " + key.repr());
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) throw RenderError(callee.undefined_hint());
  if (!callee.is_callable())
    throw RenderError("'" + callee.type_name() + "' object is not callable");
  return callee.as_callable().call(*this, args);
}

Value Interpreter::apply_filter(std::string_view name, const Value& input, CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (!fn) throw RenderError("unknown filter '" + std::string(name) + "'");
  return fn(*this, input, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& input, CallArgs& args) {
  const TestFn fn = find_test(name);
  if (!fn) throw RenderError("unknown test '" + std::string(name) + "'");
  return fn(*this, input, args);
}

List Interpreter::iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return value.as_list();
    case Value::Kind::Dict: {
      List keys;
      keys.reserve(value.as_dict().items.size());
      for (const auto& item : value.as_dict().items) keys.push_back(item.first);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (char32_t c : py::decode(value.as_string()))
        chars.emplace_back(py::encode(std::u32string(1, c)));
      return chars;
    }
    default:
      throw RenderError("'" + value.type_name() + "' object is not iterable");
  }
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes) {
    throw RenderError("output exceeds the limit of " +
                      std::to_string(options_.limits.max_output_bytes) + " bytes");
  }
}

void Interpreter::charge_iterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > options_.limits.max_loop_iterations) {
    throw RenderError("more than " + std::to_string(options_.limits.max_loop_iterations) +
                      " loop iterations");
  }
}

std::tm Interpreter::now() const {
  if (options_.now) return options_.now();
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&t, &local);
  return local;
}

}  // namespace tokamak::jinja
