#include "ops/op_profile.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace tokamak {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

class ProfiledOps final : public Ops {
 public:
  ProfiledOps(std::unique_ptr<Ops> inner, OpProfile& profile)
      : inner_(std::move(inner)), profile_(profile) {}

  Device device() const override { return inner_->device(); }
  void reserve(int64_t max_rows, int64_t max_k) override { inner_->reserve(max_rows, max_k); }
  Tensor prepare_weight(const Tensor& w) override { return inner_->prepare_weight(w); }
  Tensor prepare_stacked(std::span<const Tensor> ws) override {
    return inner_->prepare_stacked(ws);
  }

  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) override {
    timed(ProfiledOp::Matmul, [&] { inner_->matmul(x, w, y); });
  }
  void matmul_stacked(const Tensor& x, const InputNorm& norm, const Tensor& stacked,
                      std::span<const Tensor> ys) override {
    timed(ProfiledOp::Matmul, [&] { inner_->matmul_stacked(x, norm, stacked, ys); });
  }
  void matmul_add(const Tensor& x, const Tensor& w, const Tensor& y) override {
    timed(ProfiledOp::Matmul, [&] { inner_->matmul_add(x, w, y); });
  }
  Tensor prepare_gated(const Tensor& gate, const Tensor& up) override {
    return inner_->prepare_gated(gate, up);
  }
  void matmul_gated(const Tensor& x, const InputNorm& norm, const Tensor& gated,
                    const Tensor& y) override {
    timed(ProfiledOp::Matmul, [&] { inner_->matmul_gated(x, norm, gated, y); });
  }
  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override {
    timed(ProfiledOp::Rmsnorm, [&] { inner_->rmsnorm(x, weight, eps, y); });
  }
  void rope(const Tensor& x, std::span<const int32_t> positions,
            const RopeParams& params) override {
    timed(ProfiledOp::Rope, [&] { inner_->rope(x, positions, params); });
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 std::span<const int32_t> positions, const AttentionParams& params,
                 const Tensor& out) override {
    timed(ProfiledOp::Attention, [&] { inner_->attention(q, k, v, positions, params, out); });
  }
  void write_paged_kv(const Tensor& k, const Tensor& v, std::span<const int64_t> slots,
                      const PagedKVView& kv) override {
    timed(ProfiledOp::WritePagedKV, [&] { inner_->write_paged_kv(k, v, slots, kv); });
  }
  void rope_write_paged_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> positions,
                           const RopeParams& rope, std::span<const int64_t> slots,
                           const PagedKVView& kv) override {
    timed(ProfiledOp::WritePagedKV,
          [&] { inner_->rope_write_paged_kv(k, v, positions, rope, slots, kv); });
  }
  void shift_paged_k(const PagedKVView& kv, std::span<const int32_t> blocks, int32_t first_row,
                     int32_t n_rows, int32_t delta, const RopeParams& rope) override {
    timed(ProfiledOp::ShiftPagedK,
          [&] { inner_->shift_paged_k(kv, blocks, first_row, n_rows, delta, rope); });
  }
  void encode_kv_blocks(const PagedKVView& hot, const PagedKVView& main,
                        std::span<const KVBlockEncode> blocks) override {
    timed(ProfiledOp::WritePagedKV, [&] { inner_->encode_kv_blocks(hot, main, blocks); });
  }
  void paged_attention(const Tensor& q, const PagedKVView& kv, std::span<const SeqAttention> seqs,
                       const AttentionParams& params, const Tensor& out) override {
    timed(ProfiledOp::PagedAttention, [&] { inner_->paged_attention(q, kv, seqs, params, out); });
  }
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    timed(ProfiledOp::SiluMul, [&] { inner_->silu_mul(gate, up, out); });
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    timed(ProfiledOp::Add, [&] { inner_->add(a, b, out); });
  }
  void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override {
    timed(ProfiledOp::Embedding, [&] { inner_->embedding(table, ids, out); });
  }
  void copy(const Tensor& src, const Tensor& dst) override {
    timed(ProfiledOp::Copy, [&] { inner_->copy(src, dst); });
  }

 private:
  template <typename Fn>
  void timed(ProfiledOp op, const Fn& fn) {
    const auto t0 = Clock::now();
    fn();
    OpProfile::Cell& cell = profile_.at(op);
    cell.ns += ns_since(t0);
    ++cell.calls;
  }

  std::unique_ptr<Ops> inner_;
  OpProfile& profile_;
};

}  // namespace

std::string_view profiled_op_name(ProfiledOp op) {
  switch (op) {
    case ProfiledOp::Matmul:
      return "matmul";
    case ProfiledOp::Rmsnorm:
      return "rmsnorm";
    case ProfiledOp::Rope:
      return "rope";
    case ProfiledOp::Attention:
      return "attention";
    case ProfiledOp::WritePagedKV:
      return "write_paged_kv";
    case ProfiledOp::ShiftPagedK:
      return "shift_paged_k";
    case ProfiledOp::PagedAttention:
      return "paged_attention";
    case ProfiledOp::SiluMul:
      return "silu_mul";
    case ProfiledOp::Add:
      return "add";
    case ProfiledOp::Embedding:
      return "embedding";
    case ProfiledOp::Copy:
      return "copy";
    case ProfiledOp::kCount:
      break;
  }
  return "?";
}

std::string OpProfile::report() const {
  std::string out;
  for (size_t kind = 0; kind < kKinds; ++kind) {
    const Cell& step = steps[kind];
    if (step.calls == 0) continue;
    const double n_steps = static_cast<double>(step.calls);
    const double step_ms = static_cast<double>(step.ns) / 1e6 / n_steps;
    out += fmt::format("{} steps: {} (mean {:.3f} ms a step)\n",
                       kind == static_cast<size_t>(StepKind::Decode) ? "decode" : "prefill",
                       step.calls, step_ms);
    out += fmt::format("  {:<16} {:>12} {:>14} {:>8}\n", "op", "calls/step", "ms/step", "share");
    int64_t in_ops = 0;
    for (size_t op = 0; op < kOps; ++op) {
      const Cell& c = ops[kind][op];
      if (c.calls == 0) continue;
      in_ops += c.ns;
      const double ms = static_cast<double>(c.ns) / 1e6 / n_steps;
      out += fmt::format("  {:<16} {:>12.1f} {:>14.3f} {:>7.1f}%\n",
                         profiled_op_name(static_cast<ProfiledOp>(op)),
                         static_cast<double>(c.calls) / n_steps, ms,
                         100.0 * static_cast<double>(c.ns) / static_cast<double>(step.ns));
    }
    const int64_t outside = step.ns - in_ops;
    out += fmt::format("  {:<16} {:>12} {:>14.3f} {:>7.1f}%\n", "(between ops)", "",
                       static_cast<double>(outside) / 1e6 / n_steps,
                       100.0 * static_cast<double>(outside) / static_cast<double>(step.ns));
  }
  return out;
}

ProfiledStep::ProfiledStep(OpProfile* profile, StepKind kind) : profile_(profile) {
  if (profile_ == nullptr) return;
  profile_->current = kind;
  start_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

ProfiledStep::~ProfiledStep() {
  if (profile_ == nullptr) return;
  const auto now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch());
  OpProfile::Cell& step = profile_->steps[static_cast<size_t>(profile_->current)];
  step.ns += now.count() - start_ns_;
  ++step.calls;
}

std::unique_ptr<Ops> make_profiled_ops(std::unique_ptr<Ops> inner, OpProfile& profile) {
  return std::make_unique<ProfiledOps>(std::move(inner), profile);
}

}  // namespace tokamak
