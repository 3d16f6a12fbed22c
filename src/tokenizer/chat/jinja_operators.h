#pragma once
// Python's arithmetic, concatenation, comparison and membership operators on Values, as
// Jinja2 evaluates them. Errors (TypeError, ZeroDivisionError, overflow, an undefined
// operand) are RenderErrors with Python's wording.

#include <string>

#include "tokenizer/chat/jinja_ast.h"
#include "tokenizer/chat/jinja_value.h"

namespace tokamak::jinja {

class Interpreter;

// Arithmetic and `~`; And/Or are short-circuited by the interpreter, not handled here.
Value binary_op(Interpreter& in, BinaryOp op, const Value& a, const Value& b);
bool compare_op(CompareOp op, const Value& a, const Value& b);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);
Value negate(const Value& v);
// Python's `format % args` for the %s, %r, %d/%i and %% conversions.
std::string printf_format(const std::string& format, const List& args);

// Python's seq[start:stop:step] on a list, tuple or string; absent bounds are undefined/none.
Value slice_value(const Value& seq, const Value& start, const Value& stop, const Value& step);

}  // namespace tokamak::jinja
