#include "model/compute_context.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace tokamak {

namespace {

// ModelOptions::repack_weights, unless $TOKAMAK_REPACK=0 turns it off (as TOKAMAK_CPU_ISA
// lowers the kernel level: for every command, without a flag of its own).
bool repack_weights(const ModelOptions& opts) {
  const char* env = std::getenv("TOKAMAK_REPACK");
  if (env == nullptr || *env == '\0') return opts.repack_weights;
  const std::string_view v(env);
  if (v != "0" && v != "1") {
    throw Error("TOKAMAK_REPACK: unknown value '" + std::string(v) + "' (expected 0 or 1)");
  }
  return opts.repack_weights && v == "1";
}

}  // namespace

ComputeContext::ComputeContext(const ModelOptions& opts) {
  const Isa isa = opts.isa ? resolve_isa(cpu_features(), isa_name(*opts.isa)) : selected_isa();
  if (opts.pool != nullptr) {
    pool_ = opts.pool;
  } else {
    if (opts.n_threads < 0) throw Error("n_threads must not be negative");
    own_pool_ = std::make_unique<ThreadPool>(opts.n_threads, opts.cpus);
    pool_ = own_pool_.get();
  }
  ops_ = make_cpu_ops(*pool_, isa, repack_weights(opts));
  if (opts.profile != nullptr) {
    profile_ = opts.profile;
    ops_ = make_profiled_ops(std::move(ops_), *profile_);
  }
}

}  // namespace tokamak
