// Jinja's collection filters: sort, unique, map, select/reject, selectattr/rejectattr,
// min/max, sum, dictsort. Generators in Jinja (map, select, unique) yield lists here; a
// template sees the difference only by printing one without |list.

#include <algorithm>
#include <unordered_map>

#include "tokenizer/chat/jinja_builtins.h"
#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_operators.h"
#include "tokenizer/chat/py_string.h"

namespace tokamak::jinja {

namespace {

using Args = CallArgs;

// The sort/unique/min/max key of an item: an attribute path (or several, comma-separated)
// and lowercase strings unless case-sensitive.
struct KeyGetter {
  std::vector<std::string> paths;
  bool case_sensitive;

  Value key(Interpreter& in, const Value& item) const {
    if (paths.empty()) return fold(item);
    if (paths.size() == 1) return fold(get_attribute_path(in, item, paths[0]));
    List parts;
    for (const std::string& p : paths) parts.push_back(fold(get_attribute_path(in, item, p)));
    return Value(std::move(parts));
  }
  Value fold(const Value& v) const {
    return !case_sensitive && v.is_string() ? Value(py::lower(v.as_string())) : v;
  }
};

KeyGetter make_key_getter(const Value* attribute, bool case_sensitive) {
  KeyGetter getter{{}, case_sensitive};
  if (attribute && !attribute->is_none()) {
    if (attribute->is_int()) {
      getter.paths.push_back(std::to_string(attribute->as_int()));
    } else {
      for (std::string& part : py::split(attribute->str(), std::string(","), -1, false)) {
        getter.paths.push_back(py::strip(part, std::nullopt, true, true));
      }
    }
  }
  return getter;
}

void require_hashable(const Value& key) {
  if ((key.is_list() && !key.is_tuple()) || key.is_dict() || key.is_namespace()) {
    type_error("unhashable type: '" + key.type_name() + "'");
  }
}

Value f_sort(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("sort", args, {"reverse", "case_sensitive", "attribute"});
  const KeyGetter getter = make_key_getter(a.get(2), a.bool_or(1, false));
  const bool reverse = a.bool_or(0, false);
  List items = in.iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  keyed.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(getter.key(in, items[i]), i);
  // Python's sorted(reverse=True) keeps equal items in their original order.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  List out;
  out.reserve(items.size());
  for (const auto& [key, index] : keyed) out.push_back(items[index]);
  return Value(std::move(out));
}

Value f_dictsort(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) type_error("You can only sort by either \"key\" or \"value\" of a dict");
  const bool case_sensitive = a.bool_or(0, false);
  const std::string by = a.string_or(1, "key");
  if (by != "key" && by != "value") type_error("You can only sort by either \"key\" or \"value\"");
  const bool reverse = a.bool_or(2, false);
  List pairs;
  for (const auto& [k, val] : v.as_dict().items) pairs.emplace_back(List{k, val}, true);
  const KeyGetter fold{{}, case_sensitive};
  const size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value kx = fold.key(in, x.as_list()[pos]);
    const Value ky = fold.key(in, y.as_list()[pos]);
    return reverse ? less_than(ky, kx) : less_than(kx, ky);
  });
  return Value(std::move(pairs));
}

Value f_unique(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("unique", args, {"case_sensitive", "attribute"});
  const KeyGetter getter = make_key_getter(a.get(1), a.bool_or(0, false));
  List out;
  List seen;
  for (const Value& item : in.iterate(v)) {
    Value key = getter.key(in, item);
    require_hashable(key);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value(std::move(out));
}

Value min_or_max(Interpreter& in, const Value& v, Args& args, const char* name, bool want_max) {
  ArgBinder a(name, args, {"case_sensitive", "attribute"});
  const KeyGetter getter = make_key_getter(a.get(1), a.bool_or(0, false));
  const List items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = getter.key(in, items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = getter.key(in, items[i]);
    if (want_max ? less_than(best_key, key) : less_than(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_min(Interpreter& in, const Value& v, Args& args) {
  return min_or_max(in, v, args, "min", false);
}
Value f_max(Interpreter& in, const Value& v, Args& args) {
  return min_or_max(in, v, args, "max", true);
}

Value f_sum(Interpreter& in, const Value& v, Args& args) {
  ArgBinder a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value(0));
  for (const Value& item : in.iterate(v)) {
    const Value term =
        a.get(0) && !a.get(0)->is_none() ? get_attribute_path(in, item, a.get(0)->str()) : item;
    total = binary_op(in, BinaryOp::Add, total, term);
  }
  return total;
}

Value f_map(Interpreter& in, const Value& v, Args& args) {
  List out;
  const List items = in.iterate(v);
  if (args.positional.empty()) {
    ArgBinder a("map", args, {"attribute", "default"});
    const std::string path = a.required(0).str();
    for (const Value& item : items) {
      Value mapped = get_attribute_path(in, item, path);
      if (mapped.is_undefined() && a.get(1) && !a.get(1)->is_none()) mapped = *a.get(1);
      out.push_back(std::move(mapped));
    }
    return Value(std::move(out));
  }
  // map('filter', args...): apply a filter to each item.
  const std::string filter = args.positional[0].str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs call_args = rest;
    out.push_back(in.apply_filter(filter, item, call_args));
  }
  return Value(std::move(out));
}

// select/reject/selectattr/rejectattr share Jinja's _select_or_reject.
Value select_or_reject(Interpreter& in, const Value& v, Args& args, bool keep_when,
                       bool by_attribute) {
  size_t offset = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) type_error("Missing parameter for attribute name");
    attribute = args.positional[0].str();
    offset = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > offset) {
    test = args.positional[offset].str();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(offset + 1),
                                args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  if (!v.truthy()) return Value(std::move(out));
  for (const Value& item : in.iterate(v)) {
    const Value subject = by_attribute ? get_attribute_path(in, item, attribute) : item;
    bool passed;
    if (test) {
      CallArgs call_args = test_args;
      passed = in.apply_test(*test, subject, call_args);
    } else {
      passed = subject.truthy();
    }
    if (passed == keep_when) out.push_back(item);
  }
  return Value(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, Args& args) {
  return select_or_reject(in, v, args, true, false);
}
Value f_reject(Interpreter& in, const Value& v, Args& args) {
  return select_or_reject(in, v, args, false, false);
}
Value f_selectattr(Interpreter& in, const Value& v, Args& args) {
  return select_or_reject(in, v, args, true, true);
}
Value f_rejectattr(Interpreter& in, const Value& v, Args& args) {
  return select_or_reject(in, v, args, false, true);
}

}  // namespace

void register_sequence_filters(std::unordered_map<std::string_view, FilterFn>& table) {
  table.insert({{"sort", f_sort},
                {"dictsort", f_dictsort},
                {"unique", f_unique},
                {"min", f_min},
                {"max", f_max},
                {"sum", f_sum},
                {"map", f_map},
                {"select", f_select},
                {"reject", f_reject},
                {"selectattr", f_selectattr},
                {"rejectattr", f_rejectattr}});
}

}  // namespace tokamak::jinja
