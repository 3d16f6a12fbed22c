#pragma once
// Built-in profiling (`--profile`): wall time and calls per op type, split by the kind of
// forward step the op ran in (decode: one new token per sequence; prefill: anything with a
// prompt chunk), plus the steps' own wall time. Ops are timed one call at a time on the
// engine thread: the pool's threads all finish inside the call that split the work, so a
// call's wall time is the op's whole cost, threads included.
//
// The caller owns an OpProfile and hands it to the model (ModelOptions::profile); the model
// then wraps its backend in ProfiledOps and marks its steps. Not thread-safe: read it when no
// forward runs.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ops/ops.h"

namespace tokamak {

enum class ProfiledOp {
  Matmul,
  Rmsnorm,
  Rope,
  Attention,
  WritePagedKV,
  ShiftPagedK,
  PagedAttention,
  SiluMul,
  Add,
  Embedding,
  Copy,
  kCount
};
std::string_view profiled_op_name(ProfiledOp op);

enum class StepKind { Decode, Prefill, kCount };

struct OpProfile {
  struct Cell {
    int64_t calls = 0;
    int64_t ns = 0;
  };
  static constexpr size_t kOps = static_cast<size_t>(ProfiledOp::kCount);
  static constexpr size_t kKinds = static_cast<size_t>(StepKind::kCount);

  std::array<std::array<Cell, kOps>, kKinds> ops{};  // [step kind][op]
  std::array<Cell, kKinds> steps{};                  // forward steps: count and wall time
  StepKind current = StepKind::Prefill;              // the kind of the step running now

  Cell& at(ProfiledOp op) { return ops[static_cast<size_t>(current)][static_cast<size_t>(op)]; }

  // A table per step kind that ran: per op, calls per step, time per step and share of the
  // step; then what the steps spent outside ops.
  std::string report() const;
};

// Marks one forward step of a kind while it lives (a no-op for a null profile): the ops it
// runs count toward that kind, and its wall time toward the kind's steps.
class ProfiledStep {
 public:
  ProfiledStep(OpProfile* profile, StepKind kind);
  ~ProfiledStep();
  ProfiledStep(const ProfiledStep&) = delete;
  ProfiledStep& operator=(const ProfiledStep&) = delete;

 private:
  OpProfile* profile_;
  int64_t start_ns_ = 0;
};

// Ops that forwards every call to `inner` and adds its wall time to `profile`.
std::unique_ptr<Ops> make_profiled_ops(std::unique_ptr<Ops> inner, OpProfile& profile);

}  // namespace tokamak
