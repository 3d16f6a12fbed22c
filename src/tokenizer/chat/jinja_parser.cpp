#include "tokenizer/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "tokenizer/chat/jinja_expr_parser.h"
#include "tokenizer/chat/jinja_token_stream.h"

namespace tokamak::jinja {

namespace {

// Tags that Jinja has but chat templates do not need; named in the error so a user knows
// exactly what the engine lacks.
constexpr std::string_view kUnsupportedTags[] = {"filter",  "call",    "with",      "block",
                                                 "extends", "include", "import",    "from",
                                                 "do",      "trans",   "autoescape"};

class Parser {
 public:
  explicit Parser(std::string_view source) : ts_(tokenize(source)), exprs_(ts_) {}

  Body parse() {
    Body body = parse_body({});
    if (!ts_.is(TokenType::End)) ts_.fail("unexpected " + TokenStream::describe(ts_.current()));
    return body;
  }

 private:
  // Parses statements until a block tag named in `end_tags` (left unconsumed, positioned at
  // its name) or the end of the template.
  Body parse_body(std::initializer_list<std::string_view> end_tags) {
    if (++depth_ > kMaxNesting) ts_.fail("blocks nested too deeply");
    Body body;
    while (true) {
      const Token& tok = ts_.current();
      if (tok.type == TokenType::End) {
        if (end_tags.size() > 0)
          ts_.fail("missing '{% " + closing(end_tags) + " %}' before end of template");
        break;
      }
      if (tok.type == TokenType::Text) {
        body.push_back(make(TextStmt{ts_.next().text}, tok));
      } else if (tok.type == TokenType::VarBegin) {
        ts_.next();
        ExprPtr expr = exprs_.parse_tuple();
        ts_.expect(TokenType::VarEnd, "'}}'");
        body.push_back(make(EmitStmt{std::move(expr)}, tok));
      } else if (tok.type == TokenType::BlockBegin) {
        const Token& name = ts_.peek();
        if (name.type == TokenType::Name &&
            std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
          ts_.next();  // {%  (the caller consumes the tag name)
          break;
        }
        const bool closes_something =
            name.type == TokenType::Name &&
            (name.text.rfind("end", 0) == 0 || name.text == "else" || name.text == "elif");
        if (closes_something && end_tags.size() > 0) {
          TokenStream::fail_at(
              "expected '{% " + closing(end_tags) + " %}', found '{% " + name.text + " %}'", name);
        }
        ts_.next();
        body.push_back(parse_statement());
      } else {
        ts_.fail("unexpected " + TokenStream::describe(tok));
      }
    }
    --depth_;
    return body;
  }

  // The tag that closes a block: the last of its end tags ("endif" of elif/else/endif).
  static std::string closing(std::initializer_list<std::string_view> end_tags) {
    return std::string(*(end_tags.end() - 1));
  }

  template <typename Node>
  Stmt make(Node node, const Token& at) {
    Stmt s;
    s.node = std::move(node);
    s.line = at.line;
    s.column = at.column;
    return s;
  }

  void end_tag() { ts_.expect(TokenType::BlockEnd, "'%}'"); }

  Stmt parse_statement() {
    const Token& tag = ts_.current();
    if (tag.type != TokenType::Name) ts_.fail("expected a tag name after '{%'");
    const std::string& name = tag.text;
    ts_.next();
    if (name == "if") return parse_if(tag);
    if (name == "for") return parse_for(tag);
    if (name == "set") return parse_set(tag);
    if (name == "macro") return parse_macro(tag);
    if (name == "generation") return parse_generation(tag);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) TokenStream::fail_at("'" + name + "' outside of a for loop", tag);
      end_tag();
      if (name == "break") return make(BreakStmt{}, tag);
      return make(ContinueStmt{}, tag);
    }
    if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), name) !=
        std::end(kUnsupportedTags)) {
      TokenStream::fail_at("unsupported tag '" + name + "'", tag);
    }
    if (name.rfind("end", 0) == 0 || name == "else" || name == "elif") {
      TokenStream::fail_at("unexpected tag '" + name + "'", tag);
    }
    TokenStream::fail_at("unknown tag '" + name + "'", tag);
  }

  Stmt parse_if(const Token& tag) {
    IfStmt node;
    ExprPtr cond = exprs_.parse_tuple();
    end_tag();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"});
      node.branches.emplace_back(std::move(cond), std::move(body));
      const std::string which = ts_.next().text;
      if (which == "elif") {
        cond = exprs_.parse_tuple();
        end_tag();
        continue;
      }
      end_tag();
      if (which == "else") {
        node.otherwise = parse_body({"endif"});
        ts_.next();
        end_tag();
      }
      break;
    }
    return make(std::move(node), tag);
  }

  Stmt parse_for(const Token& tag) {
    ForStmt node;
    node.targets = exprs_.parse_names();
    ts_.expect_name("in");
    node.iterable = exprs_.parse_tuple(/*with_condexpr=*/false);
    if (ts_.skip_name("if")) node.filter = exprs_.parse_expression();
    if (ts_.is_name("recursive")) ts_.fail("recursive for loops are not supported");
    end_tag();
    ++loop_depth_;
    node.body = parse_body({"else", "endfor"});
    --loop_depth_;
    if (ts_.next().text == "else") {
      end_tag();
      node.otherwise = parse_body({"endfor"});
      ts_.next();
    }
    end_tag();
    return make(std::move(node), tag);
  }

  Stmt parse_set(const Token& tag) {
    std::vector<std::string> targets;
    std::string attribute;
    if (ts_.is(TokenType::Name) && ts_.peek().type == TokenType::Operator &&
        ts_.peek().text == ".") {
      targets.push_back(ts_.next().text);
      ts_.next();  // .
      attribute = ts_.expect(TokenType::Name, "an attribute name").text;
    } else {
      targets = exprs_.parse_names();
    }
    if (ts_.skip_op("=")) {
      ExprPtr value = exprs_.parse_tuple();
      end_tag();
      return make(SetStmt{std::move(targets), std::move(attribute), std::move(value)}, tag);
    }
    if (ts_.is_op("|")) ts_.fail("filtered set blocks are not supported");
    if (targets.size() != 1 || !attribute.empty()) ts_.fail("expected '=' in set");
    end_tag();
    Body body = parse_body({"endset"});
    ts_.next();
    end_tag();
    return make(SetBlockStmt{targets[0], std::move(body)}, tag);
  }

  Stmt parse_macro(const Token& tag) {
    MacroStmt node;
    node.name = ts_.expect(TokenType::Name, "a macro name").text;
    ts_.expect_op("(");
    while (!ts_.is_op(")")) {
      if (!node.params.empty()) ts_.expect_op(",");
      std::string param = ts_.expect(TokenType::Name, "a parameter name").text;
      ExprPtr def = ts_.skip_op("=") ? exprs_.parse_expression() : nullptr;
      if (!def && !node.params.empty() && node.params.back().second) {
        ts_.fail("non-default parameter follows default parameter");
      }
      node.params.emplace_back(std::move(param), std::move(def));
    }
    ts_.expect_op(")");
    end_tag();
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    node.body = parse_body({"endmacro"});
    loop_depth_ = saved_loop_depth;
    ts_.next();
    end_tag();
    return make(std::move(node), tag);
  }

  Stmt parse_generation(const Token& tag) {
    end_tag();
    Body body = parse_body({"endgeneration"});
    ts_.next();
    end_tag();
    return make(ScopeStmt{std::move(body)}, tag);
  }

  TokenStream ts_;
  ExprParser exprs_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  return Parser(source).parse();
}

}  // namespace tokamak::jinja
