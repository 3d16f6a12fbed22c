#pragma once
// Python's str semantics over UTF-8 std::string: templates index, slice, measure, strip,
// split and case-map strings by code point, the way CPython does. Bytes that are not valid
// UTF-8 are carried through unchanged (decoded as lone surrogates U+DC80..U+DCFF, as Python's
// "surrogateescape" does), so nothing a model file contains is lost or rejected here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak::jinja::py {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);
void append_utf8(std::string& out, char32_t c);

// Number of code points (Python's len(str)).
size_t length(std::string_view utf8);

// Python's str.isspace() for one code point.
bool is_space(char32_t c);

// str.strip / lstrip / rstrip; `chars` absent strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);

// str.split / rsplit; `sep` absent splits on runs of whitespace. maxsplit < 0 means no limit.
// An empty `sep` is an error in Python; the caller checks.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s);

// Case mapping (simple one-to-one Unicode mappings).
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);    // str.capitalize and Jinja's capitalize filter
std::string title_method(std::string_view s);  // str.title()
std::string title_filter(std::string_view s);  // Jinja's title filter (splits on -, space, ([{<)
bool is_upper(std::string_view s);
bool is_lower(std::string_view s);

// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                    int64_t count);
// str.find / str.count over code points; find returns -1 when absent.
int64_t find(std::string_view s, std::string_view sub, bool from_right);
int64_t count(std::string_view s, std::string_view sub);

// Python's repr() of a str: 'text' with escapes, double-quoted when only that avoids escaping.
std::string repr(std::string_view s);

// Python's repr()/str() of a float: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string float_repr(double v);

}  // namespace tokamak::jinja::py
