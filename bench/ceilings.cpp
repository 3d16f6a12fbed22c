#include "ceilings.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ceilings_kernels.h"
#include "core/aligned_buffer.h"
#include "core/cpu_features.h"

namespace tokamak::bench {

uint64_t read_sum_generic(const void* p, size_t bytes) {
  const auto* v = static_cast<const uint64_t*>(p);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= bytes / 8; i += 4) {
    s0 += v[i];
    s1 += v[i + 1];
    s2 += v[i + 2];
    s3 += v[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One run of n threads: the seconds from their release until the last finished, and whether
// every thread was on a core all that time (its CPU time at least 95% of its wall time). On a
// machine shared with other work a thread is often descheduled; such a trial says nothing
// about the hardware and is discarded.
struct Trial {
  double seconds;
  bool undisturbed;
};

// Runs body(t) for t in [0, n) on n threads released together.
Trial run_together(int n, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Clock::time_point> end(static_cast<size_t>(n));
  std::vector<char> on_core(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const Clock::time_point w0 = Clock::now();
      const double c0 = thread_cpu_seconds();
      body(t);
      const double cpu = thread_cpu_seconds() - c0;
      end[static_cast<size_t>(t)] = Clock::now();
      const double wall = std::chrono::duration<double>(end[static_cast<size_t>(t)] - w0).count();
      on_core[static_cast<size_t>(t)] = cpu >= 0.95 * wall;
    });
  }
  while (ready.load() < n) std::this_thread::yield();
  const Clock::time_point t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : threads) th.join();
  const Clock::time_point last = *std::max_element(end.begin(), end.end());
  const bool undisturbed = std::all_of(on_core.begin(), on_core.end(), [](char c) { return c; });
  return {std::chrono::duration<double>(last - t0).count(), undisturbed};
}

// The best rate (work / seconds) over runs: over undisturbed runs when there are any, and
// then `quiet` is true. Runs until `trials` undisturbed ones, or for about `budget` seconds
// (at least `trials` runs) when the machine is too busy to give that many.
struct Rate {
  double value;
  bool quiet;
};
Rate best_rate(int trials, double budget, double work, const std::function<Trial()>& run) {
  const Clock::time_point start = Clock::now();
  double best_quiet = 0;
  double best_any = 0;
  int quiet = 0;
  for (int i = 0; quiet < trials && (i < trials || seconds_since(start) < budget); ++i) {
    const Trial t = run();
    const double rate = work / t.seconds;
    best_any = std::max(best_any, rate);
    if (t.undisturbed) {
      best_quiet = std::max(best_quiet, rate);
      ++quiet;
    }
  }
  return quiet > 0 ? Rate{best_quiet, true} : Rate{best_any, false};
}

constexpr double kBudgetSeconds = 3.0;  // per ceiling and thread count

// Keeps results alive so that no loop is optimised away.
std::atomic<uint64_t> g_sink{0};
void consume(double v) {
  g_sink.fetch_add(static_cast<uint64_t>(v) & 1u);
}

// Iterations of `loop` that take about `seconds` on one thread.
int64_t calibrate(const PeakLoop& loop, double seconds) {
  int64_t iters = 1000;
  for (;;) {
    const Clock::time_point t0 = Clock::now();
    consume(loop.run(iters));
    const double s = seconds_since(t0);
    if (s > 0.01) return std::max<int64_t>(1, static_cast<int64_t>(iters * seconds / s));
    iters *= 4;
  }
}

// Best ops/s of `loop` on n threads, each running `iters` iterations.
Rate peak_rate(const PeakLoop& loop, int64_t iters, int n, int trials) {
  const double ops = loop.ops_per_iter * static_cast<double>(iters) * n;
  return best_rate(trials, kBudgetSeconds, ops,
                   [&] { return run_together(n, [&](int) { consume(loop.run(iters)); }); });
}

ReadLoop best_read_loop(const CpuFeatures& f) {
  if (f.avx512f) return avx512::read_sum;
  if (f.avx2) return avx2::read_sum;
  return read_sum_generic;
}

// Best bytes/s of n threads reading disjoint slices of a window of `window` bytes of `buf`,
// each slice `passes` times. Successive trials take successive windows of the `bytes` of buf,
// so that a window is never in the caches from the trial before (when bytes >> the LLC).
// bytes is a multiple of window; slices are cut to multiples of 1 KiB.
Rate read_rate(ReadLoop read, const uint8_t* buf, size_t bytes, size_t window, int n, int passes,
               int trials) {
  const size_t slice = window / static_cast<size_t>(n) / 1024 * 1024;
  const double total = static_cast<double>(slice) * n * passes;
  size_t next = 0;
  return best_rate(trials, kBudgetSeconds, total, [&] {
    const uint8_t* base = buf + next;
    next = (next + window) % bytes;
    return run_together(n, [&](int t) {
      const uint8_t* p = base + slice * static_cast<size_t>(t);
      uint64_t sum = 0;
      for (int pass = 0; pass < passes; ++pass) sum += read(p, slice);
      consume(static_cast<double>(sum));
    });
  });
}

// The median bytes/s of `passes` runs of n threads reading all `bytes` of buf once, each
// thread a contiguous slice (as a decode step splits each matmul's rows). Disturbed runs are
// kept: the median is meant to be what a long stream usually gets, not the best case.
double pass_rate(ReadLoop read, const uint8_t* buf, size_t bytes, int n, int passes) {
  const size_t slice = bytes / static_cast<size_t>(n) / 1024 * 1024;
  const double total = static_cast<double>(slice) * n;
  std::vector<double> rates;
  for (int i = 0; i < passes; ++i) {
    const Trial t = run_together(n, [&](int th) {
      consume(static_cast<double>(read(buf + slice * static_cast<size_t>(th), slice)));
    });
    rates.push_back(total / t.seconds);
  }
  std::sort(rates.begin(), rates.end());
  const size_t mid = rates.size() / 2;
  return rates.size() % 2 == 1 ? rates[mid] : 0.5 * (rates[mid - 1] + rates[mid]);
}

// One core's clock: a chain of dependent integer multiplies retires one per 3 cycles on every
// x86-64 core of the last decade (Intel since Nehalem, AMD since Zen). A chain of adds of an
// immediate does not: Golden Cove's renamer folds them, and it read 18-20 GHz on the AMX guest.
double measure_clock_ghz(int trials) {
#if defined(__x86_64__)
  constexpr int64_t kSteps = 1'000'000;  // x 10 multiplies of 3 cycles: a few ms
  const Rate ghz = best_rate(trials, kBudgetSeconds, kSteps * 10 * 3 / 1e9, [&] {
    return run_together(1, [&](int) {
      uint64_t x = 3;
      for (int64_t i = 0; i < kSteps; ++i) {
        asm volatile(
            "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\t"
            "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0"
            : "+r"(x));
      }
      consume(static_cast<double>(x));
    });
  });
  return ghz.value;
#else
  (void)trials;
  return 0;
#endif
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

const CeilingRow* Ceilings::at(int threads) const {
  for (const CeilingRow& r : rows) {
    if (r.threads == threads) return &r;
  }
  return nullptr;
}

Ceilings measure_ceilings(const CeilingOptions& opt) {
  const CpuFeatures& f = cpu_features();
  std::vector<int> counts = opt.threads;
  if (counts.empty()) {
    counts = {1, std::max(1, static_cast<int>(std::thread::hardware_concurrency()))};
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  const int max_threads = counts.back();

  Ceilings c;
  c.cpu = cpu_model_name();
  c.isa = std::string(isa_name(best_isa(f)));
  // A trial reads one quarter of the DRAM buffer: long enough to stream from DRAM, short
  // enough to often run undisturbed on a shared machine.
  const size_t dram_window = opt.dram_bytes / 4 / 1024 * 1024;
  c.dram_bytes = dram_window * 4;
  c.l2_bytes = opt.l2_bytes / 1024 * 1024;
  c.trials = opt.trials;
  c.passes = opt.passes;
  c.clock_ghz = measure_clock_ghz(opt.trials);

  // Buffers written before use: untouched anonymous pages all map the one zero page, which
  // would be read from cache.
  AlignedBuffer<uint8_t> dram(c.dram_bytes, Pages::Huge);  // as the weights are (aligned_buffer.h)
  run_together(max_threads, [&](int t) {
    const size_t slice = c.dram_bytes / static_cast<size_t>(max_threads);
    std::memset(dram.data() + slice * static_cast<size_t>(t), 1, slice);
  });
  AlignedBuffer<uint8_t> l2(c.l2_bytes * static_cast<size_t>(max_threads));
  std::memset(l2.data(), 1, l2.size());
  const ReadLoop read = best_read_loop(f);
  // Passes over the L2 buffer in one trial: about 256 MiB read per thread.
  const int l2_passes = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / c.l2_bytes));

  const bool vnni = f.avx512f && f.avx512_vnni;
  const bool bf16 = f.avx512f && f.avx512_bf16;
  const bool amx = best_isa(f) >= Isa::Amx;
  struct Loop {
    bool present;
    PeakLoop (*make)();
    const char* name;
    double CeilingRow::*field;
  };
  const Loop loops[] = {
      {f.avx2 && f.fma, avx2::fma_f32, "fma_f32_avx2", &CeilingRow::fma_f32_avx2},
      {f.avx512f, avx512::fma_f32, "fma_f32_avx512", &CeilingRow::fma_f32_avx512},
      {f.avx2, avx2::dot_i8, "dot_i8_avx2", &CeilingRow::dot_i8_avx2},
      {vnni, avx512::dot_i8, "dot_i8_vnni", &CeilingRow::dot_i8_vnni},
      {bf16, avx512::dot_bf16, "dot_bf16", &CeilingRow::dot_bf16},
      {amx, amx::dot_i8, "dot_i8_amx", &CeilingRow::dot_i8_amx},
      {amx, amx::dot_i8_k32, "dot_i8_amx_k32", &CeilingRow::dot_i8_amx_k32},
      {vnni, avx512::dot_i8_blocks, "dot_i8_blocks_vnni", &CeilingRow::dot_i8_blocks_vnni},
      {amx, amx::dot_i8_blocks, "dot_i8_blocks_amx", &CeilingRow::dot_i8_blocks_amx},
  };
  int64_t iters[std::size(loops)] = {};
  for (size_t i = 0; i < std::size(loops); ++i) {
    if (loops[i].present) iters[i] = calibrate(loops[i].make(), opt.trial_seconds);
  }

  for (int n : counts) {
    CeilingRow row;
    row.threads = n;
    const auto keep = [&](const char* name, double CeilingRow::*field, Rate r) {
      row.*field = r.value;
      if (!r.quiet) c.disturbed.push_back(std::string(name) + "@" + std::to_string(n));
    };
    keep("read_bw", &CeilingRow::read_bw,
         read_rate(read, dram.data(), c.dram_bytes, dram_window, n, 1, opt.trials));
    row.read_bw_pass = pass_rate(read, dram.data(), c.dram_bytes, n, opt.passes);
    const size_t l2_all = c.l2_bytes * static_cast<size_t>(n);
    keep("read_bw_l2", &CeilingRow::read_bw_l2,
         read_rate(read, l2.data(), l2_all, l2_all, n, l2_passes, opt.trials));
    for (size_t i = 0; i < std::size(loops); ++i) {
      if (loops[i].present) {
        keep(loops[i].name, loops[i].field, peak_rate(loops[i].make(), iters[i], n, opt.trials));
      }
    }
    c.rows.push_back(row);
  }
  return c;
}

namespace {

// The JSON names of CeilingRow's rates.
struct Field {
  const char* name;
  double CeilingRow::*field;
};
constexpr Field kFields[] = {
    {"read_bw", &CeilingRow::read_bw},
    {"read_bw_pass", &CeilingRow::read_bw_pass},
    {"read_bw_l2", &CeilingRow::read_bw_l2},
    {"fma_f32_avx2", &CeilingRow::fma_f32_avx2},
    {"fma_f32_avx512", &CeilingRow::fma_f32_avx512},
    {"dot_i8_avx2", &CeilingRow::dot_i8_avx2},
    {"dot_i8_vnni", &CeilingRow::dot_i8_vnni},
    {"dot_bf16", &CeilingRow::dot_bf16},
    {"dot_i8_amx", &CeilingRow::dot_i8_amx},
    {"dot_i8_amx_k32", &CeilingRow::dot_i8_amx_k32},
    {"dot_i8_blocks_vnni", &CeilingRow::dot_i8_blocks_vnni},
    {"dot_i8_blocks_amx", &CeilingRow::dot_i8_blocks_amx},
};

}  // namespace

std::string ceilings_table(const Ceilings& c) {
  std::ostringstream out;
  char line[256];
  out << "cpu: " << c.cpu << "   kernel level: " << c.isa << "\n";
  std::snprintf(line, sizeof line,
                "clock: %.2f GHz (one core, dependent-multiply chain)   best of %d trials\n",
                c.clock_ghz, c.trials);
  out << line;

  out << "ceiling                              ";
  for (const CeilingRow& r : c.rows) {
    std::snprintf(line, sizeof line, "%10d thr", r.threads);
    out << line;
  }
  out << "   per core-cycle (1 thr)\n";
  const CeilingRow* one = c.at(1);
  const auto disturbed = [&](double CeilingRow::*field, int threads) {
    for (const Field& f : kFields) {
      if (f.field == field) {
        const std::string key = std::string(f.name) + "@" + std::to_string(threads);
        return std::find(c.disturbed.begin(), c.disturbed.end(), key) != c.disturbed.end();
      }
    }
    return false;
  };
  const auto print = [&](const char* name, double CeilingRow::*field, const char* unit,
                         const char* per_cycle_unit) {
    std::snprintf(line, sizeof line, "%-37s", name);
    out << line;
    for (const CeilingRow& r : c.rows) {
      std::snprintf(line, sizeof line, "%13.1f%c", r.*field / 1e9,
                    disturbed(field, r.threads) ? '*' : ' ');
      out << line;
    }
    out << " " << unit;
    if (one != nullptr && c.clock_ghz > 0 && one->*field > 0) {
      std::snprintf(line, sizeof line, "   %.1f %s", one->*field / (c.clock_ghz * 1e9),
                    per_cycle_unit);
      out << line;
    }
    out << "\n";
  };
  char name[64];
  std::snprintf(name, sizeof name, "read bandwidth, %zu MiB (DRAM)", c.dram_bytes >> 20);
  print(name, &CeilingRow::read_bw, "GB/s", "B/cycle");
  std::snprintf(name, sizeof name, "read, one pass, median of %d", c.passes);
  print(name, &CeilingRow::read_bw_pass, "GB/s", "B/cycle");
  std::snprintf(name, sizeof name, "read bandwidth, %zu KiB/thread (L2)", c.l2_bytes >> 10);
  print(name, &CeilingRow::read_bw_l2, "GB/s", "B/cycle");
  print("fp32 FMA, AVX2 ymm", &CeilingRow::fma_f32_avx2, "GFLOP/s", "FLOP/cycle");
  print("fp32 FMA, AVX-512 zmm", &CeilingRow::fma_f32_avx512, "GFLOP/s", "FLOP/cycle");
  print("int8 dot, AVX2 maddubs+maddwd", &CeilingRow::dot_i8_avx2, "GOPS", "op/cycle");
  print("int8 dot, AVX512-VNNI vpdpbusd", &CeilingRow::dot_i8_vnni, "GOPS", "op/cycle");
  print("bf16 dot, AVX512-BF16 vdpbf16ps", &CeilingRow::dot_bf16, "GFLOP/s", "FLOP/cycle");
  if (!c.rows.empty() && c.rows.back().dot_i8_amx > 0) {
    print("int8 tile, AMX tdpbssd, 64 deep", &CeilingRow::dot_i8_amx, "GOPS", "op/cycle");
    print("int8 tile, AMX tdpbssd, 32 deep", &CeilingRow::dot_i8_amx_k32, "GOPS", "op/cycle");
  }
  if (!c.rows.empty() && c.rows.back().dot_i8_blocks_vnni > 0) {
    print("int8 32-blocks scaled, VNNI", &CeilingRow::dot_i8_blocks_vnni, "GOPS", "op/cycle");
  }
  if (!c.rows.empty() && c.rows.back().dot_i8_blocks_amx > 0) {
    print("int8 32-blocks scaled, AMX", &CeilingRow::dot_i8_blocks_amx, "GOPS", "op/cycle");
  }
  if (!c.disturbed.empty()) {
    out << "* no trial ran undisturbed (the machine was busy): a lower bound only\n";
  }
  return out.str();
}

std::string ceilings_json(const Ceilings& c) {
  nlohmann::json j;
  j["cpu"] = c.cpu;
  j["isa"] = c.isa;
  j["clock_ghz"] = c.clock_ghz;
  j["dram_bytes"] = c.dram_bytes;
  j["l2_bytes"] = c.l2_bytes;
  j["trials"] = c.trials;
  j["passes"] = c.passes;
  j["units"] = "bytes/s for read_bw*, FLOP/s for fma_* and dot_bf16, ops/s for dot_i8_*";
  j["disturbed"] = c.disturbed;
  j["rows"] = nlohmann::json::array();
  for (const CeilingRow& r : c.rows) {
    nlohmann::json row;
    row["threads"] = r.threads;
    for (const Field& f : kFields) row[f.name] = r.*f.field;
    j["rows"].push_back(row);
  }
  return j.dump(2) + "\n";
}

Ceilings load_ceilings(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read ceilings file " + path);
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    Ceilings c;
    c.cpu = j.at("cpu").get<std::string>();
    c.isa = j.at("isa").get<std::string>();
    c.clock_ghz = j.at("clock_ghz").get<double>();
    c.dram_bytes = j.at("dram_bytes").get<size_t>();
    c.l2_bytes = j.at("l2_bytes").get<size_t>();
    c.trials = j.at("trials").get<int>();
    c.passes = j.value("passes", 0);  // files written before read_bw_pass have neither
    if (j.contains("disturbed")) c.disturbed = j["disturbed"].get<std::vector<std::string>>();
    for (const nlohmann::json& row : j.at("rows")) {
      CeilingRow r;
      r.threads = row.at("threads").get<int>();
      if (r.threads < 1) throw std::runtime_error("threads must be >= 1");
      // Files written before read_bw_pass and the block ceilings lack them.
      const auto optional = [](double CeilingRow::*field) {
        return field == &CeilingRow::read_bw_pass || field == &CeilingRow::dot_i8_blocks_vnni ||
               field == &CeilingRow::dot_i8_blocks_amx;
      };
      for (const Field& f : kFields) {
        r.*f.field = optional(f.field) ? row.value(f.name, 0.0) : row.at(f.name).get<double>();
      }
      c.rows.push_back(r);
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("bad ceilings file " + path + ": " + e.what());
  }
}

}  // namespace tokamak::bench
