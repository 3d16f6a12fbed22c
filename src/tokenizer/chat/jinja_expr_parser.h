#pragma once
// Jinja's expression grammar, lowest precedence first (as Jinja2's parser.py):
//   condexpr : or ('if' or ('else' condexpr)?)*
//   or       : and ('or' and)*          and : not ('and' not)*
//   not      : 'not' not | compare      compare : math1 ((== != < <= > >= in 'not in') math1)*
//   math1    : concat (('+'|'-') concat)*   concat : math2 ('~' math2)*
//   math2    : pow (('*'|'/'|'//'|'%') pow)*   pow : unary ('**' unary)*
//   unary    : ('-'|'+') unary | primary postfix* ; then filters / tests / calls
// Internal to the parser.

#include "tokenizer/chat/jinja_ast.h"
#include "tokenizer/chat/jinja_token_stream.h"

namespace tokamak::jinja {

class ExprParser {
 public:
  explicit ExprParser(TokenStream& ts) : ts_(ts) {}

  ExprPtr parse_expression(bool with_condexpr = true);
  // A comma-separated list becomes a tuple: `a, b`. With explicit parentheses an empty
  // tuple `()` is allowed.
  ExprPtr parse_tuple(bool with_condexpr = true, bool explicit_parentheses = false);
  // Parses `name` or `name, name` targets of for/set; stops before 'in' or '='.
  std::vector<std::string> parse_names();

 private:
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ArgList parse_call_args();
  std::string parse_dotted_name();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  bool at_tuple_end() const;

  template <typename Node>
  ExprPtr make(Node node, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->node = std::move(node);
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // Counts recursion into nested expressions; throws past kMaxNesting.
  struct DepthGuard {
    DepthGuard(ExprParser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.ts_.fail("expression nested too deeply");
    }
    ~DepthGuard() { --parser.depth_; }
    ExprParser& parser;
  };

  TokenStream& ts_;
  int depth_ = 0;
};

}  // namespace tokamak::jinja
