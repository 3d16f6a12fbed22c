#pragma once
// The syntax tree of a parsed template. Nodes are immutable after parsing, so one tree is
// rendered by many threads at once.
//
//   {% for m in messages if m.role != 'system' %}{{ m.content | trim }}{% endfor %}
//   -> For{targets=[m], iterable=Name(messages),
//          filter=Compare(GetAttr(Name(m), role), [!=, Literal('system')]),
//          body=[Emit(Filter(GetAttr(Name(m), content), trim))]}

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tokenizer/chat/jinja_value.h"

namespace tokamak::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct LiteralExpr {
  Value value;  // string, number, bool or none
};
struct NameExpr {
  std::string name;
};
struct ListExpr {  // [a, b] or (a, b)
  std::vector<ExprPtr> items;
  bool is_tuple = false;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct GetAttrExpr {  // obj.name (attribute first, then item, as Jinja's getattr)
  ExprPtr object;
  std::string name;
};
struct GetItemExpr {  // obj[key] (item first, then attribute, as Jinja's getitem)
  ExprPtr object;
  ExprPtr key;
};
struct SliceExpr {  // obj[start:stop:step]; absent bounds are null
  ExprPtr object;
  ExprPtr start, stop, step;
};
struct CallExpr {
  ExprPtr callee;
  ArgList args;
};
struct FilterExpr {  // input | name(args)
  ExprPtr input;
  std::string name;
  ArgList args;
};
struct TestExpr {  // input is [not] name(args)
  ExprPtr input;
  std::string name;
  ArgList args;
  bool negated = false;
};
enum class UnaryOp { Neg, Pos, Not };
struct UnaryExpr {
  UnaryOp op;
  ExprPtr operand;
};
enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat, And, Or };
struct BinaryExpr {
  BinaryOp op;
  ExprPtr left, right;
};
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
struct CompareExpr {  // a < b <= c, x in y: chained, as in Python
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};
struct CondExpr {  // then if cond else otherwise; a missing else yields undefined
  ExprPtr then, cond, otherwise;
};

struct Expr {
  std::variant<LiteralExpr, NameExpr, ListExpr, DictExpr, GetAttrExpr, GetItemExpr, SliceExpr,
               CallExpr, FilterExpr, TestExpr, UnaryExpr, BinaryExpr, CompareExpr, CondExpr>
      node;
  int line = 0;
  int column = 0;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct TextStmt {  // literal text between tags
  std::string text;
};
struct EmitStmt {  // {{ expr }}
  ExprPtr expr;
};
struct IfStmt {  // if / elif... / else
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
};
struct ForStmt {
  std::vector<std::string> targets;  // one name, or several for tuple unpacking
  ExprPtr iterable;
  ExprPtr filter;  // `if` condition after the iterable; may be null
  Body body;
  Body otherwise;  // runs when no item was iterated
};
struct SetStmt {  // {% set a = x %}, {% set a, b = x %}, {% set ns.attr = x %}
  std::vector<std::string> targets;
  std::string attribute;  // non-empty for ns.attr: targets[0] is the namespace name
  ExprPtr value;
};
struct SetBlockStmt {  // {% set name %}...{% endset %}
  std::string target;
  Body body;
};
struct MacroStmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
};
struct ScopeStmt {  // a body run in its own scope ({% generation %} of transformers)
  Body body;
};
struct BreakStmt {};
struct ContinueStmt {};

struct Stmt {
  std::variant<TextStmt, EmitStmt, IfStmt, ForStmt, SetStmt, SetBlockStmt, MacroStmt, ScopeStmt,
               BreakStmt, ContinueStmt>
      node;
  int line = 0;
  int column = 0;
};

}  // namespace tokamak::jinja
