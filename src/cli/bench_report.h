#pragma once
// What `tokamak bench` prints and saves: aligned tables, latency rows, JSON, peak memory.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/stats.h"
#include "engine/engine_core.h"
#include "engine/request.h"

namespace tokamak::cli {

using TableRow = std::vector<std::string>;

// Rows as aligned columns, one line each, two spaces apart: the first column left-aligned,
// the others right-aligned (numbers) or left-aligned (key-value lists). Rows may have fewer
// cells than others.
enum class Align { Right, Left };
std::string format_table(const std::vector<TableRow>& rows, Align values = Align::Right);

// "label  mean  p50  p99  max" in milliseconds ("-" for no values).
TableRow latency_row(const std::string& label, const std::optional<Summary>& ms);
TableRow latency_header();

// The engine's configuration as built: KV pool, limits, modes.
nlohmann::json engine_json(const EngineCore& core);

// {"count", "mean", "p50", "p90", "p99", "min", "max"}, or null for no values.
nlohmann::json to_json(const std::optional<Summary>& summary);

double to_ms(Clock::duration d);

// A figure that may be missing, in JSON and in tables: null / "-" for none; `number` reads
// one back (nullopt when `j` is no object or the key is absent or not a number).
nlohmann::json nullable(const std::optional<double>& v);
std::optional<double> number(const nlohmann::json& j, const char* key);
std::string fixed(const std::optional<double>& v, int digits = 2);

// The process's peak resident memory (VmHWM from /proc/self/status, else getrusage), or
// nullopt where neither can be read.
std::optional<size_t> peak_resident_bytes();
std::string format_mib(std::optional<size_t> bytes);  // "412.3 MiB", "-"

// Writes `doc` (indented) to `path`; throws Error when it cannot.
void write_json(const std::string& path, const nlohmann::json& doc);

// Throws Error ("--FLAG PATH: the folder ... does not exist") when `path` (the value of
// --`flag`; empty: none) is in a folder that does not exist, before any work is done.
void check_output_path(const std::string& flag, const std::string& path);

}  // namespace tokamak::cli
