#pragma once
// Renders a parsed template. One Interpreter serves one render and is then dropped; the
// syntax tree it walks is shared and never changed, so renders of one template may run on
// many threads at once.
//
// Scoping follows Jinja2: `set` writes to the innermost scope; each for-loop iteration and
// each macro call opens a new scope whose assignments vanish with it (hence namespace());
// if-blocks open none. Undefined follows Jinja2's default Undefined: printing it gives "",
// it is falsy and iterates as empty, and any other use (attribute, item, arithmetic, call)
// is an error naming what was undefined.

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat/jinja_ast.h"
#include "tokenizer/chat/jinja_value.h"

namespace tokamak::jinja {

// Bounds on one render, so a hostile or broken template fails fast with a clear error
// instead of exhausting memory, time or stack.
struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;  // the output, and any one string or list built
  uint64_t max_loop_iterations = 1'000'000;    // for-loop iterations in the whole render
  int max_call_depth = 64;                     // nested macro calls
};

struct RenderOptions {
  RenderLimits limits;
  // The local time strftime_now() formats. Empty: the system clock. Tests inject a fixed
  // time so that templates that print today's date render deterministically.
  std::function<std::tm()> now;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options);
  ~Interpreter();

  // Renders `body` with the top-level variables `context` (transformers' render kwargs).
  std::string render(const Body& body, std::vector<std::pair<std::string, Value>> context);

  // --- services for filters, tests, methods and globals ---

  // Jinja's environment.getattr: attribute (method) first, then item; missing -> undefined.
  Value get_attr(const Value& object, std::string_view name);
  // Jinja's environment.getitem: item first, then attribute for string keys.
  Value get_item(const Value& object, const Value& key);
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(std::string_view name, const Value& input, CallArgs& args);
  bool apply_test(std::string_view name, const Value& input, CallArgs& args);
  // The items a for-loop (or list()) would visit: list items, dict keys, string characters;
  // undefined is empty. Other values are an error.
  List iterate(const Value& value);
  // Throws when something the template builds grows past the output limit.
  void check_size(size_t bytes) const;
  // Counts loop-like iterations done by builtins (range, filters) against the limit.
  void charge_iterations(uint64_t n);
  // Registers a namespace made during this render. Namespaces are the only mutable values,
  // so any reference cycle runs through one; the interpreter empties them all when the
  // render ends, which frees such cycles.
  void track(const std::shared_ptr<Namespace>& ns) { namespaces_.push_back(ns); }
  std::tm now() const;

 private:
  struct Frame;
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& stmt);
  Flow exec_for(const ForStmt& node);
  void exec_set(const SetStmt& node);
  Value make_macro(const MacroStmt& node);
  std::string capture(const Body& body, std::shared_ptr<Frame> scope);
  void emit(std::string_view text);

  Value eval(const Expr& expr);
  Value eval_node(const LiteralExpr& node, const Expr& expr);
  Value eval_node(const NameExpr& node, const Expr& expr);
  Value eval_node(const ListExpr& node, const Expr& expr);
  Value eval_node(const DictExpr& node, const Expr& expr);
  Value eval_node(const GetAttrExpr& node, const Expr& expr);
  Value eval_node(const GetItemExpr& node, const Expr& expr);
  Value eval_node(const SliceExpr& node, const Expr& expr);
  Value eval_node(const CallExpr& node, const Expr& expr);
  Value eval_node(const FilterExpr& node, const Expr& expr);
  Value eval_node(const TestExpr& node, const Expr& expr);
  Value eval_node(const UnaryExpr& node, const Expr& expr);
  Value eval_node(const BinaryExpr& node, const Expr& expr);
  Value eval_node(const CompareExpr& node, const Expr& expr);
  Value eval_node(const CondExpr& node, const Expr& expr);
  CallArgs eval_args(const ArgList& args);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);

  const RenderOptions& options_;
  std::shared_ptr<Frame> frame_;  // innermost scope
  std::string* out_ = nullptr;    // where emitted text goes (redirected by macros, set blocks)
  uint64_t iterations_ = 0;
  int call_depth_ = 0;
  std::vector<std::weak_ptr<Namespace>> namespaces_;
};

}  // namespace tokamak::jinja
