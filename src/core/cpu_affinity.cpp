#include "core/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <thread>

#include "core/error.h"

namespace tokamak {
namespace {

// A CPU number: digits only, below CPU_SETSIZE.
int parse_cpu(std::string_view s, std::string_view spec) {
  int v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v >= CPU_SETSIZE) {
    throw Error("--affinity: '" + std::string(spec) + "' is not none, auto or a CPU list such as " +
                "0-3,6 (bad CPU '" + std::string(s) + "')");
  }
  return v;
}

}  // namespace

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) {
    const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> parse_cpu_affinity(std::string_view spec) {
  if (spec == "none") return {};
  const std::vector<int> allowed = allowed_cpus();
  if (spec == "auto") return allowed;
  std::vector<int> cpus;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string_view item = spec.substr(at, comma - at);
    const size_t dash = item.find('-');
    const int first = parse_cpu(item.substr(0, dash), spec);
    const int last =
        dash == std::string_view::npos ? first : parse_cpu(item.substr(dash + 1), spec);
    if (last < first) {
      throw Error("--affinity: the range '" + std::string(item) + "' runs backwards");
    }
    for (int c = first; c <= last; ++c) {
      if (std::find(cpus.begin(), cpus.end(), c) != cpus.end()) {
        throw Error("--affinity: CPU " + std::to_string(c) + " is named twice");
      }
      if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
        throw Error("--affinity: CPU " + std::to_string(c) +
                    " is not one this process may run on (" + std::to_string(allowed.size()) +
                    " allowed, from " + std::to_string(allowed.front()) + " to " +
                    std::to_string(allowed.back()) + ")");
      }
      cpus.push_back(c);
    }
    at = comma + 1;
  }
  return cpus;
}

int kernel_thread_count(int requested, const std::vector<int>& cpus) {
  if (requested > 0) return requested;
  return static_cast<int>(cpus.empty() ? allowed_cpus().size() : cpus.size());
}

void pin_thread(int cpu, std::thread::native_handle_type thread) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int err = pthread_setaffinity_np(thread, sizeof set, &set);
  if (err != 0) {
    throw Error("cannot pin a kernel thread to CPU " + std::to_string(cpu) + ": " +
                std::strerror(err));
  }
}

}  // namespace tokamak
