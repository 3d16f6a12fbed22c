#pragma once
// What a model computes with: the kernel thread pool (its own, or one it was given) and the
// backend's Ops, built once from ModelOptions.

#include <memory>

#include "core/thread_pool.h"
#include "model/model_options.h"
#include "ops/op_profile.h"
#include "ops/ops.h"

namespace tokamak {

class ComputeContext {
 public:
  // Throws Error when opts.isa (or TOKAMAK_CPU_ISA) names a level this CPU lacks, or
  // TOKAMAK_REPACK is neither 0 nor 1.
  explicit ComputeContext(const ModelOptions& opts);

  Ops& ops() { return *ops_; }
  OpProfile* profile() const { return profile_; }  // null unless profiling
  ThreadPool& pool() { return *pool_; }

 private:
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_;
  std::unique_ptr<Ops> ops_;
  OpProfile* profile_ = nullptr;
};

}  // namespace tokamak
