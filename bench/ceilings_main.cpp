// tokamak_ceilings: measures this machine's ceilings (ceilings.h), prints them as a table
// and, with --json FILE, writes them as JSON (which tokamak_kernels_bench --ceilings=FILE
// reads instead of measuring again).
//
//   tokamak_ceilings [--json FILE] [--threads 1,2|all] [--dram-mib N] [--trials N] [--passes N]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "ceilings.h"

namespace {

int usage(const char* argv0, FILE* to = stderr) {
  std::fprintf(
      to,
      "usage: %s [--json FILE] [--threads LIST|all] [--dram-mib N] [--trials N] [--passes N]\n"
      "  --threads   comma-separated thread counts, `all` for every hardware thread\n"
      "              (default: 1,all)\n"
      "  --dram-mib  size of the DRAM read buffer in MiB, >= 16 (default 1024)\n"
      "  --trials    trials per ceiling, the best is kept (default 10)\n"
      "  --passes    whole-buffer passes for the one-pass read rate, the median is\n"
      "              kept (default 7)\n",
      argv0);
  return to == stderr ? 2 : 0;
}

int positive(const std::string& s) {
  size_t used = 0;
  const int v = std::stoi(s, &used);
  if (used != s.size() || v < 1) throw std::invalid_argument(s);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  tokamak::bench::CeilingOptions opt;
  std::string json_path;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "-h" || arg == "--help") return usage(argv[0], stdout);
      if (i + 1 >= argc) return usage(argv[0]);
      const std::string value = argv[++i];
      if (arg == "--json") {
        json_path = value;
      } else if (arg == "--threads") {
        std::stringstream list(value);
        for (std::string item; std::getline(list, item, ',');) {
          const int all = static_cast<int>(std::thread::hardware_concurrency());
          opt.threads.push_back(item == "all" ? std::max(1, all) : positive(item));
        }
      } else if (arg == "--dram-mib") {
        const int mib = positive(value);
        if (mib < 16) return usage(argv[0]);  // a window must still leave the caches behind
        opt.dram_bytes = static_cast<size_t>(mib) << 20;
      } else if (arg == "--trials") {
        opt.trials = positive(value);
      } else if (arg == "--passes") {
        opt.passes = positive(value);
      } else {
        return usage(argv[0]);
      }
    }
  } catch (const std::exception&) {
    return usage(argv[0]);
  }

  const tokamak::bench::Ceilings c = tokamak::bench::measure_ceilings(opt);
  std::cout << tokamak::bench::ceilings_table(c);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << tokamak::bench::ceilings_json(c);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
