#include "model/compute_context.h"

#include <string>
#include <utility>

#include "core/error.h"

namespace tokamak {

ComputeContext::ComputeContext(const ModelOptions& opts) {
  const Isa isa = opts.isa ? resolve_isa(cpu_features(), isa_name(*opts.isa)) : selected_isa();
  if (opts.pool != nullptr) {
    pool_ = opts.pool;
  } else {
    if (opts.n_threads < 0) throw Error("n_threads must not be negative");
    own_pool_ = std::make_unique<ThreadPool>(opts.n_threads);
    pool_ = own_pool_.get();
  }
  ops_ = make_cpu_ops(*pool_, isa);
  if (opts.profile != nullptr) {
    profile_ = opts.profile;
    ops_ = make_profiled_ops(std::move(ops_), *profile_);
  }
}

}  // namespace tokamak
