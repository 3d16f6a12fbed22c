#include "cli/bench_report.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace tokamak::cli {

std::string format_table(const std::vector<TableRow>& rows, Align values) {
  std::vector<size_t> widths;
  for (const TableRow& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const TableRow& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(widths[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += c == 0 || values == Align::Left ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

TableRow latency_header() {
  return {"", "mean", "p50", "p99", "max"};
}

TableRow latency_row(const std::string& label, const std::optional<Summary>& ms) {
  if (!ms) return {label, "-", "-", "-", "-"};
  const auto f = [](double v) { return fmt::format("{:.2f}", v); };
  return {label, f(ms->mean), f(ms->p50), f(ms->p99), f(ms->max)};
}

nlohmann::json engine_json(const EngineCore& core) {
  const EngineOptions& o = core.options();
  const PagedKVCache& kv = core.kv_cache();
  return {{"kv_blocks", kv.n_blocks()},
          {"block_size", kv.block_size()},
          {"kv_tokens", int64_t{kv.n_blocks()} * kv.block_size()},
          {"kv_bytes", kv.total_bytes()},
          {"kv_bytes_per_token", kv.bytes_per_token()},
          {"kv_dtype", kv_dtypes_name(kv.dtype())},
          {"kv_budget", o.kv_budget.describe()},
          {"max_batched_tokens", o.max_batched_tokens},
          {"max_seqs", o.max_seqs},
          {"chunked_prefill", o.chunked_prefill},
          {"preemption", preemption_mode_name(o.preemption)},
          {"prefix_cache", o.prefix_caching},
          {"schedule_policy", schedule_policy_name(o.schedule_policy)},
          {"max_model_len", core.max_model_len()}};
}

nlohmann::json to_json(const std::optional<Summary>& s) {
  if (!s) return nullptr;
  return {{"count", s->count}, {"mean", s->mean}, {"p50", s->p50}, {"p90", s->p90},
          {"p99", s->p99},     {"min", s->min},   {"max", s->max}};
}

double to_ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

nlohmann::json nullable(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

std::optional<double> number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

std::string fixed(const std::optional<double>& v, int digits) {
  return v ? fmt::format("{:.{}f}", *v, digits) : "-";
}

std::optional<size_t> peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) {
      std::istringstream fields(line.substr(6));
      size_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0 && usage.ru_maxrss > 0) {
    return static_cast<size_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  }
  return std::nullopt;
}

std::string format_mib(std::optional<size_t> bytes) {
  if (!bytes) return "-";
  return fmt::format("{:.1f} MiB", static_cast<double>(*bytes) / (1024.0 * 1024));
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot open for writing");
  out << doc.dump(2) << '\n';
  if (!out) throw Error(path + ": write failed");
}

void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir)) {
    throw Error(fmt::format("--{} {}: the folder {} does not exist", flag, path, dir.string()));
  }
}

}  // namespace tokamak::cli
