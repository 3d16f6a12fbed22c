// Expression evaluation of the Interpreter (statements are in jinja_eval.cpp).

#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_eval.h"
#include "tokenizer/chat/jinja_operators.h"

namespace tokamak::jinja {

Value Interpreter::eval(const Expr& expr) {
  try {
    return std::visit([&](const auto& node) { return eval_node(node, expr); }, expr.node);
  } catch (const RenderError& err) {
    if (err.located()) throw;
    throw RenderError("chat template: " + std::string(err.what()) + " at line " +
                          std::to_string(expr.line) + ", column " + std::to_string(expr.column),
                      true);
  }
}

CallArgs Interpreter::eval_args(const ArgList& args) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const ExprPtr& e : args.positional) out.positional.push_back(eval(*e));
  for (const auto& [name, e] : args.keyword) out.keyword.emplace_back(name, eval(*e));
  return out;
}

Value Interpreter::eval_node(const LiteralExpr& node, const Expr&) {
  return node.value;
}

Value Interpreter::eval_node(const NameExpr& node, const Expr&) {
  return lookup(node.name);
}

Value Interpreter::eval_node(const ListExpr& node, const Expr&) {
  List items;
  items.reserve(node.items.size());
  for (const ExprPtr& e : node.items) items.push_back(eval(*e));
  return Value(std::move(items), node.is_tuple);
}

Value Interpreter::eval_node(const DictExpr& node, const Expr&) {
  Dict dict;
  for (const auto& [k, v] : node.items) {
    Value key = eval(*k);
    if (key.is_list() && !key.is_tuple()) throw RenderError("unhashable type: 'list'");
    if (key.is_dict()) throw RenderError("unhashable type: 'dict'");
    dict.set(std::move(key), eval(*v));
  }
  return Value(std::move(dict));
}

Value Interpreter::eval_node(const GetAttrExpr& node, const Expr&) {
  return get_attr(eval(*node.object), node.name);
}

Value Interpreter::eval_node(const GetItemExpr& node, const Expr&) {
  const Value object = eval(*node.object);
  return get_item(object, eval(*node.key));
}

Value Interpreter::eval_node(const SliceExpr& node, const Expr&) {
  const Value object = eval(*node.object);
  const Value start = node.start ? eval(*node.start) : Value::none();
  const Value stop = node.stop ? eval(*node.stop) : Value::none();
  const Value step = node.step ? eval(*node.step) : Value::none();
  return slice_value(object, start, stop, step);
}

Value Interpreter::eval_node(const CallExpr& node, const Expr&) {
  const Value callee = eval(*node.callee);
  CallArgs args = eval_args(node.args);
  return call(callee, args);
}

Value Interpreter::eval_node(const FilterExpr& node, const Expr&) {
  const Value input = eval(*node.input);
  CallArgs args = eval_args(node.args);
  return apply_filter(node.name, input, args);
}

Value Interpreter::eval_node(const TestExpr& node, const Expr&) {
  const Value input = eval(*node.input);
  CallArgs args = eval_args(node.args);
  return apply_test(node.name, input, args) != node.negated;
}

Value Interpreter::eval_node(const UnaryExpr& node, const Expr&) {
  const Value v = eval(*node.operand);
  switch (node.op) {
    case UnaryOp::Not:
      return !v.truthy();
    case UnaryOp::Neg:
      return negate(v);
    case UnaryOp::Pos:
      if (v.is_undefined()) throw RenderError(v.undefined_hint());
      if (!v.is_number())
        throw RenderError("bad operand type for unary +: '" + v.type_name() + "'");
      return v.is_bool() ? Value(v.to_int()) : v;
  }
  return Value();
}

Value Interpreter::eval_node(const BinaryExpr& node, const Expr&) {
  // `and`/`or` return an operand, not a bool, and short-circuit (Python semantics).
  if (node.op == BinaryOp::And) {
    Value left = eval(*node.left);
    return left.truthy() ? eval(*node.right) : left;
  }
  if (node.op == BinaryOp::Or) {
    Value left = eval(*node.left);
    return left.truthy() ? left : eval(*node.right);
  }
  const Value left = eval(*node.left);
  const Value right = eval(*node.right);
  return binary_op(*this, node.op, left, right);
}

Value Interpreter::eval_node(const CompareExpr& node, const Expr&) {
  Value left = eval(*node.first);
  for (const auto& [op, operand] : node.rest) {
    Value right = eval(*operand);
    if (!compare_op(op, left, right)) return false;
    left = std::move(right);
  }
  return true;
}

Value Interpreter::eval_node(const CondExpr& node, const Expr&) {
  if (eval(*node.cond).truthy()) return eval(*node.then);
  if (node.otherwise) return eval(*node.otherwise);
  return Value::undefined(
      "the inline if-expression evaluated to false and no else section was defined");
}

}  // namespace tokamak::jinja
