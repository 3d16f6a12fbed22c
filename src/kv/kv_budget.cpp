#include "kv/kv_budget.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace tokamak {
namespace {

// Budgets above this many bytes are typos, not machines: 1 PiB.
constexpr double kMaxBudgetBytes = 1024.0 * 1024 * 1024 * 1024 * 1024;

[[noreturn]] void reject(std::string_view text, std::string_view reason) {
  throw Error(fmt::format(
      "invalid KV memory \"{}\": {}; expected a byte count (\"1073741824\"), a size with a K, "
      "M, G or T suffix, optionally followed by B or iB (\"512M\", \"1.5GiB\"), or a share of "
      "free memory (\"0.3\", \"30%\")",
      text, reason));
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
char to_upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the leading unsigned decimal ("12", "1.5", ".5", "3."), 0 when there is none.
size_t decimal_length(std::string_view s) {
  size_t i = 0;
  size_t digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  return digits > 0 ? i : 0;
}

// Multiplier of a unit suffix ("", "B", "K", "KB", "KiB", ... case-insensitive), or 0 for an
// unknown one. An empty suffix returns 1.
double unit_multiplier(std::string_view unit) {
  if (unit.empty()) return 1;
  if (unit.size() == 1 && to_upper(unit[0]) == 'B') return 1;
  static constexpr std::string_view kPrefixes = "KMGT";
  size_t power = kPrefixes.find(to_upper(unit[0]));
  if (power == std::string_view::npos) return 0;
  std::string_view rest = unit.substr(1);
  bool ok = rest.empty() || (rest.size() == 1 && to_upper(rest[0]) == 'B') ||
            (rest.size() == 2 && to_upper(rest[0]) == 'I' && to_upper(rest[1]) == 'B');
  return ok ? std::ldexp(1.0, 10 * static_cast<int>(power + 1)) : 0;
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  double scaled = bytes / 1024;
  size_t unit = 0;
  while (scaled >= 1024 && unit + 1 < kUnits.size()) scaled /= 1024, ++unit;
  return fmt::format("{:.2f} {}", scaled, kUnits[unit]);
}

}  // namespace

KVBudget KVBudget::parse_memory(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) reject(text, "it is empty");
  if (s.front() == '-') reject(text, "it must be positive");
  size_t length = decimal_length(s);
  if (length == 0) reject(text, "it does not start with a number");
  double number = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + length, number, std::chars_format::fixed);
  if (ec == std::errc::result_out_of_range) reject(text, "the size is absurdly large");
  if (ec != std::errc() || end != s.data() + length) reject(text, "it is not a number");
  std::string_view unit = trim(s.substr(length));
  bool whole = s.substr(0, length).find('.') == std::string_view::npos;

  if (number <= 0) reject(text, "it must be positive");
  KVBudget budget;
  if (unit == "%") {
    if (number > 100) reject(text, "a percentage of free memory must be at most 100%");
    budget.kind = Kind::FractionOfFree;
    budget.value = number / 100;
    return budget;
  }
  if (unit.empty() && number <= 1) {
    budget.kind = Kind::FractionOfFree;
    budget.value = number;
    return budget;
  }
  if (unit.empty() && !whole) {
    reject(text, "a plain number is a fraction of free memory in (0, 1] or a whole byte count");
  }
  double multiplier = unit_multiplier(unit);
  if (multiplier == 0) reject(text, fmt::format("unknown unit \"{}\"", unit));
  double bytes = std::floor(number * multiplier);
  if (bytes < 1) reject(text, "it is less than one byte");
  if (bytes > kMaxBudgetBytes) reject(text, "the size is absurdly large (over 1 PiB)");
  budget.kind = Kind::Bytes;
  budget.value = bytes;
  return budget;
}

KVBudget KVBudget::tokens(int64_t n) {
  if (n <= 0) throw Error(fmt::format("invalid KV token count {}: it must be positive", n));
  KVBudget budget;
  budget.kind = Kind::Tokens;
  budget.value = static_cast<double>(n);
  return budget;
}

int32_t KVBudget::blocks(size_t bytes_per_block, int32_t block_size, size_t free_bytes) const {
  assert(bytes_per_block > 0 && block_size > 0);
  double n = 0;
  std::string bought;  // what the budget came to, for the error message
  switch (kind) {
    case Kind::Bytes:
      n = std::floor(value / static_cast<double>(bytes_per_block));
      bought = describe();
      break;
    case Kind::FractionOfFree: {
      double bytes = std::floor(value * static_cast<double>(free_bytes));
      n = std::floor(bytes / static_cast<double>(bytes_per_block));
      bought = fmt::format("{} ({} of {} free)", describe(), format_bytes(bytes),
                           format_bytes(static_cast<double>(free_bytes)));
      break;
    }
    case Kind::Tokens:
      n = std::ceil(value / block_size);
      bought = describe();
      break;
  }
  if (!(n >= 1)) {  // also catches NaN
    throw Error(
        fmt::format("KV budget {} is less than one block ({} for {} tokens); raise --kv-memory or "
                    "--kv-tokens",
                    bought, format_bytes(static_cast<double>(bytes_per_block)), block_size));
  }
  constexpr double kMaxBlocks = std::numeric_limits<int32_t>::max();
  return n >= kMaxBlocks ? std::numeric_limits<int32_t>::max() : static_cast<int32_t>(n);
}

std::string KVBudget::describe() const {
  switch (kind) {
    case Kind::Bytes:
      return format_bytes(value);
    case Kind::FractionOfFree:
      return fmt::format("{:g}% of free memory", value * 100);
    case Kind::Tokens:
      return fmt::format("{:.0f} tokens", value);
  }
  return {};
}

std::optional<size_t> available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  while (meminfo >> key) {
    if (key == "MemAvailable:") {
      size_t kib = 0;
      if (meminfo >> kib) return kib * 1024;
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  long pages = sysconf(_SC_AVPHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0)
    return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
  return std::nullopt;
}

}  // namespace tokamak
