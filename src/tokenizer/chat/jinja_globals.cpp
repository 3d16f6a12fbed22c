// Global functions available to templates: Jinja's range, namespace, dict, and the two
// transformers adds, raise_exception and strftime_now.

#include <array>
#include <unordered_map>

#include "tokenizer/chat/jinja_builtins.h"
#include "tokenizer/chat/jinja_error.h"

namespace tokamak::jinja {

namespace {

// The sandbox's MAX_RANGE: range() refuses to build more items than this.
constexpr int64_t kMaxRange = 100000;

Value g_range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) type_error("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3)
    type_error("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (p.size() == 1) {
    stop = require_int(p[0], "range() argument");
  } else {
    start = require_int(p[0], "range() argument");
    stop = require_int(p[1], "range() argument");
    if (p.size() == 3) step = require_int(p[2], "range() argument");
  }
  if (step == 0) type_error("range() arg 3 must not be zero");
  // Count first, without overflow: stop - start may not fit in int64, but fits in uint64.
  uint64_t count = 0;
  if (step > 0 && stop > start) {
    const uint64_t span = static_cast<uint64_t>(stop) - static_cast<uint64_t>(start);
    const auto stride = static_cast<uint64_t>(step);
    count = span / stride + (span % stride != 0 ? 1 : 0);
  } else if (step < 0 && stop < start) {
    const uint64_t span = static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
    const uint64_t stride = static_cast<uint64_t>(-(step + 1)) + 1;
    count = span / stride + (span % stride != 0 ? 1 : 0);
  }
  if (count > static_cast<uint64_t>(kMaxRange)) {
    type_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
               std::to_string(kMaxRange) + ").");
  }
  in.charge_iterations(count);
  List items;
  items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) items.emplace_back(start + static_cast<int64_t>(i) * step);
  return Value(std::move(items));
}

Value g_namespace(Interpreter& in, CallArgs& args) {
  auto ns = std::make_shared<Namespace>();
  in.track(ns);
  if (args.positional.size() > 1) type_error("namespace() takes at most one positional argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict()) type_error("namespace() positional argument must be a dict");
    for (const auto& [k, v] : args.positional[0].as_dict().items) ns->set(k.str(), v);
  }
  for (const auto& [k, v] : args.keyword) ns->set(k, v);
  return Value(std::move(ns));
}

Value g_dict(Interpreter&, CallArgs& args) {
  Dict dict;
  if (args.positional.size() > 1) type_error("dict expected at most 1 argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict()) type_error("dict() positional argument must be a dict");
    dict = args.positional[0].as_dict();
  }
  for (const auto& [k, v] : args.keyword) dict.set(Value(k), v);
  return Value(std::move(dict));
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
  ArgBinder a("raise_exception", args, {"message"});
  throw RaisedError(a.required(0).str());
}

Value g_strftime_now(Interpreter& in, CallArgs& args) {
  ArgBinder a("strftime_now", args, {"format"});
  const std::string format = a.string_or(0, "");
  a.required(0);
  if (format.empty()) return "";
  const std::tm now = in.now();
  // strftime returns 0 both on overflow and for an empty result; grow the buffer a few times.
  for (size_t size = 64; size <= 64 * 1024; size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &now);
    if (n > 0) {
      buf.resize(n);
      return buf;
    }
  }
  return "";
}

Value make_global(const char* name, Value (*fn)(Interpreter&, CallArgs&)) {
  return Value(std::make_shared<const Callable>(Callable{name, fn}));
}

}  // namespace

const Value* find_global(std::string_view name) {
  static const std::unordered_map<std::string_view, Value> table = {
      {"range", make_global("range", g_range)},
      {"namespace", make_global("namespace", g_namespace)},
      {"dict", make_global("dict", g_dict)},
      {"raise_exception", make_global("raise_exception", g_raise_exception)},
      {"strftime_now", make_global("strftime_now", g_strftime_now)},
  };
  const auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace tokamak::jinja
