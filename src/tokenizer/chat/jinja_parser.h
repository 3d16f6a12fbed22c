#pragma once
// Parses template source into the syntax tree of jinja_ast.h. Supports the statements chat
// templates use (if/elif/else, for/else with loop filters and tuple targets, set and set
// blocks, namespace attribute assignment, macro, break/continue, transformers' generation
// block, raw) and Jinja's full expression grammar. Anything else is rejected with a
// SyntaxError naming the construct, line and column, e.g.
//   chat template: unsupported tag 'filter' at line 3, column 1

#include <string_view>

#include "tokenizer/chat/jinja_ast.h"

namespace tokamak::jinja {

Body parse_template(std::string_view source);

}  // namespace tokamak::jinja
