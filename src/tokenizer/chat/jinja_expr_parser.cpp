#include "tokenizer/chat/jinja_expr_parser.h"

namespace tokamak::jinja {

ExprPtr ExprParser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

bool ExprParser::at_tuple_end() const {
  return ts_.is(TokenType::VarEnd) || ts_.is(TokenType::BlockEnd) || ts_.is(TokenType::End) ||
         ts_.is_op(")") || ts_.is_op("=") || ts_.is_name("in") || ts_.is_name("if") ||
         ts_.is_name("recursive");
}

ExprPtr ExprParser::parse_tuple(bool with_condexpr, bool explicit_parentheses) {
  const Token& start = ts_.current();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ts_.expect_op(",");
    if (at_tuple_end()) break;
    items.push_back(parse_expression(with_condexpr));
    if (ts_.is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses)
      ts_.fail("expected an expression, found " + TokenStream::describe(ts_.current()));
  }
  return make(ListExpr{std::move(items), true}, start);
}

std::vector<std::string> ExprParser::parse_names() {
  const bool parenthesized = ts_.skip_op("(");
  std::vector<std::string> names;
  do {
    names.push_back(ts_.expect(TokenType::Name, "a variable name").text);
  } while (ts_.skip_op(","));
  if (parenthesized) ts_.expect_op(")");
  return names;
}

ExprPtr ExprParser::parse_condexpr() {
  DepthGuard guard(*this);
  ExprPtr expr = parse_or();
  while (ts_.is_name("if")) {
    const Token& at = ts_.next();
    ExprPtr cond = parse_or();
    ExprPtr otherwise = ts_.skip_name("else") ? parse_condexpr() : nullptr;
    expr = make(CondExpr{std::move(expr), std::move(cond), std::move(otherwise)}, at);
  }
  return expr;
}

ExprPtr ExprParser::parse_or() {
  ExprPtr left = parse_and();
  while (ts_.is_name("or")) {
    const Token& at = ts_.next();
    left = make(BinaryExpr{BinaryOp::Or, std::move(left), parse_and()}, at);
  }
  return left;
}

ExprPtr ExprParser::parse_and() {
  ExprPtr left = parse_not();
  while (ts_.is_name("and")) {
    const Token& at = ts_.next();
    left = make(BinaryExpr{BinaryOp::And, std::move(left), parse_not()}, at);
  }
  return left;
}

ExprPtr ExprParser::parse_not() {
  if (ts_.is_name("not")) {
    DepthGuard guard(*this);
    const Token& at = ts_.next();
    return make(UnaryExpr{UnaryOp::Not, parse_not()}, at);
  }
  return parse_compare();
}

ExprPtr ExprParser::parse_compare() {
  const Token& start = ts_.current();
  ExprPtr first = parse_math1();
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  while (true) {
    CompareOp op;
    if (ts_.is_op("=="))
      op = CompareOp::Eq;
    else if (ts_.is_op("!="))
      op = CompareOp::Ne;
    else if (ts_.is_op("<"))
      op = CompareOp::Lt;
    else if (ts_.is_op("<="))
      op = CompareOp::Le;
    else if (ts_.is_op(">"))
      op = CompareOp::Gt;
    else if (ts_.is_op(">="))
      op = CompareOp::Ge;
    else if (ts_.is_name("in"))
      op = CompareOp::In;
    else if (ts_.is_name("not") && ts_.peek().type == TokenType::Name && ts_.peek().text == "in") {
      ts_.next();
      op = CompareOp::NotIn;
    } else {
      break;
    }
    ts_.next();
    rest.emplace_back(op, parse_math1());
  }
  if (rest.empty()) return first;
  return make(CompareExpr{std::move(first), std::move(rest)}, start);
}

ExprPtr ExprParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (ts_.is_op("+") || ts_.is_op("-")) {
    const Token& at = ts_.next();
    const BinaryOp op = at.text == "+" ? BinaryOp::Add : BinaryOp::Sub;
    left = make(BinaryExpr{op, std::move(left), parse_concat()}, at);
  }
  return left;
}

ExprPtr ExprParser::parse_concat() {
  ExprPtr left = parse_math2();
  while (ts_.is_op("~")) {
    const Token& at = ts_.next();
    left = make(BinaryExpr{BinaryOp::Concat, std::move(left), parse_math2()}, at);
  }
  return left;
}

ExprPtr ExprParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (ts_.is_op("*") || ts_.is_op("/") || ts_.is_op("//") || ts_.is_op("%")) {
    const Token& at = ts_.next();
    const BinaryOp op = at.text == "*"    ? BinaryOp::Mul
                        : at.text == "/"  ? BinaryOp::Div
                        : at.text == "//" ? BinaryOp::FloorDiv
                                          : BinaryOp::Mod;
    left = make(BinaryExpr{op, std::move(left), parse_pow()}, at);
  }
  return left;
}

ExprPtr ExprParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (ts_.is_op("**")) {  // left-associative, as in Jinja
    const Token& at = ts_.next();
    left = make(BinaryExpr{BinaryOp::Pow, std::move(left), parse_unary(true)}, at);
  }
  return left;
}

ExprPtr ExprParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr node;
  if (ts_.is_op("-") || ts_.is_op("+")) {
    const Token& at = ts_.next();
    const UnaryOp op = at.text == "-" ? UnaryOp::Neg : UnaryOp::Pos;
    node = make(UnaryExpr{op, parse_unary(false)}, at);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExprParser::parse_primary() {
  const Token& tok = ts_.current();
  switch (tok.type) {
    case TokenType::Name: {
      ts_.next();
      if (tok.text == "true" || tok.text == "True") return make(LiteralExpr{Value(true)}, tok);
      if (tok.text == "false" || tok.text == "False") return make(LiteralExpr{Value(false)}, tok);
      if (tok.text == "none" || tok.text == "None") return make(LiteralExpr{Value::none()}, tok);
      return make(NameExpr{tok.text}, tok);
    }
    case TokenType::String: {
      std::string text = ts_.next().text;
      while (ts_.is(TokenType::String)) text += ts_.next().text;  // 'a' 'b' == 'ab'
      return make(LiteralExpr{Value(std::move(text))}, tok);
    }
    case TokenType::Integer:
      ts_.next();
      return make(LiteralExpr{Value(tok.int_value)}, tok);
    case TokenType::Float:
      ts_.next();
      return make(LiteralExpr{Value(tok.float_value)}, tok);
    default:
      break;
  }
  if (ts_.is_op("(")) {
    ts_.next();
    ExprPtr inner = parse_tuple(true, true);
    ts_.expect_op(")");
    return inner;
  }
  if (ts_.is_op("[")) return parse_list();
  if (ts_.is_op("{")) return parse_dict();
  ts_.fail("unexpected " + TokenStream::describe(tok));
}

ExprPtr ExprParser::parse_list() {
  const Token& at = ts_.next();  // [
  std::vector<ExprPtr> items;
  while (!ts_.is_op("]")) {
    if (!items.empty()) ts_.expect_op(",");
    if (ts_.is_op("]")) break;
    items.push_back(parse_expression());
  }
  ts_.expect_op("]");
  return make(ListExpr{std::move(items), false}, at);
}

ExprPtr ExprParser::parse_dict() {
  const Token& at = ts_.next();  // {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  while (!ts_.is_op("}")) {
    if (!items.empty()) ts_.expect_op(",");
    if (ts_.is_op("}")) break;
    ExprPtr key = parse_expression();
    ts_.expect_op(":");
    items.emplace_back(std::move(key), parse_expression());
  }
  ts_.expect_op("}");
  return make(DictExpr{std::move(items)}, at);
}

ExprPtr ExprParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (ts_.is_op(".") || ts_.is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (ts_.is_op("(")) {
      const Token& at = ts_.current();
      node = make(CallExpr{std::move(node), parse_call_args()}, at);
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (ts_.is_op("|")) {
      node = parse_filter(std::move(node));
    } else if (ts_.is_name("is")) {
      node = parse_test(std::move(node));
    } else if (ts_.is_op("(")) {
      const Token& at = ts_.current();
      node = make(CallExpr{std::move(node), parse_call_args()}, at);
    } else {
      return node;
    }
  }
}

ExprPtr ExprParser::parse_subscript(ExprPtr node) {
  const Token& at = ts_.next();  // . or [
  if (at.text == ".") {
    const Token& attr = ts_.current();
    if (attr.type == TokenType::Name) {
      ts_.next();
      return make(GetAttrExpr{std::move(node), attr.text}, attr);
    }
    if (attr.type == TokenType::Integer) {  // foo.0 is foo[0]
      ts_.next();
      return make(GetItemExpr{std::move(node), make(LiteralExpr{Value(attr.int_value)}, attr)},
                  attr);
    }
    ts_.fail("expected an attribute name after '.'");
  }
  // [key], [start:stop:step] or [a, b] (a tuple key).
  std::vector<ExprPtr> keys;
  ExprPtr slice;
  while (!ts_.is_op("]")) {
    if (!keys.empty() || slice) ts_.expect_op(",");
    ExprPtr start;
    if (!ts_.is_op(":")) {
      start = parse_expression();
      if (!ts_.is_op(":")) {
        keys.push_back(std::move(start));
        continue;
      }
    }
    if (!keys.empty() || slice) ts_.fail("tuple subscripts with slices are not supported");
    ts_.expect_op(":");
    ExprPtr stop;
    ExprPtr step;
    if (!ts_.is_op("]") && !ts_.is_op(",") && !ts_.is_op(":")) stop = parse_expression();
    if (ts_.skip_op(":") && !ts_.is_op("]") && !ts_.is_op(",")) step = parse_expression();
    slice = make(SliceExpr{nullptr, std::move(start), std::move(stop), std::move(step)}, at);
  }
  ts_.expect_op("]");
  if (slice) {
    std::get<SliceExpr>(slice->node).object = std::move(node);
    return slice;
  }
  if (keys.empty()) TokenStream::fail_at("expected a subscript inside '[]'", at);
  ExprPtr key = keys.size() == 1 ? std::move(keys[0]) : make(ListExpr{std::move(keys), true}, at);
  return make(GetItemExpr{std::move(node), std::move(key)}, at);
}

std::string ExprParser::parse_dotted_name() {
  std::string name = ts_.expect(TokenType::Name, "a name").text;
  while (ts_.is_op(".") && ts_.peek().type == TokenType::Name) {
    ts_.next();
    name += "." + ts_.next().text;
  }
  return name;
}

ExprPtr ExprParser::parse_filter(ExprPtr node) {
  const Token& at = ts_.next();  // |
  std::string name = parse_dotted_name();
  ArgList args;
  if (ts_.is_op("(")) args = parse_call_args();
  return make(FilterExpr{std::move(node), std::move(name), std::move(args)}, at);
}

ExprPtr ExprParser::parse_test(ExprPtr node) {
  const Token& at = ts_.next();  // is
  const bool negated = ts_.skip_name("not");
  std::string name = parse_dotted_name();
  ArgList args;
  const Token& cur = ts_.current();
  if (ts_.is_op("(")) {
    args = parse_call_args();
  } else if ((cur.type == TokenType::Name || cur.type == TokenType::String ||
              cur.type == TokenType::Integer || cur.type == TokenType::Float || ts_.is_op("[") ||
              ts_.is_op("{")) &&
             !ts_.is_name("else") && !ts_.is_name("or") && !ts_.is_name("and")) {
    // `x is divisibleby 3`: one argument without parentheses.
    if (ts_.is_name("is")) ts_.fail("tests cannot be chained with 'is'");
    args.positional.push_back(parse_postfix(parse_primary()));
  }
  return make(TestExpr{std::move(node), std::move(name), std::move(args), negated}, at);
}

ArgList ExprParser::parse_call_args() {
  ts_.expect_op("(");
  ArgList args;
  while (!ts_.is_op(")")) {
    if (!args.positional.empty() || !args.keyword.empty()) ts_.expect_op(",");
    if (ts_.is_op(")")) break;
    if (ts_.is_op("*") || ts_.is_op("**"))
      ts_.fail("*args and **kwargs in calls are not supported");
    if (ts_.is(TokenType::Name) && ts_.peek().type == TokenType::Operator &&
        ts_.peek().text == "=") {
      std::string key = ts_.next().text;
      ts_.next();  // =
      args.keyword.emplace_back(std::move(key), parse_expression());
    } else {
      if (!args.keyword.empty()) ts_.fail("positional argument after keyword argument");
      args.positional.push_back(parse_expression());
    }
  }
  ts_.expect_op(")");
  return args;
}

}  // namespace tokamak::jinja
