// Built-in profiling (ops/op_profile.h) on a tiny model: a prefill and two decode steps land
// in their step kinds with the op calls the llama forward makes (7 matmuls a layer plus the
// head, or 4 where Q/K/V and gate/up are stacked), times that add up within each step, and a
// report naming both kinds; a model without a profile is unaffected and gives the same logits.

#include "ops/op_profile.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/matmul.h"
#include "model/model.h"
#include "model_test_util.h"

namespace tokamak::op_profile_test {
namespace {

SyntheticModelSpec tiny() {
  SyntheticModelSpec s;
  s.n_vocab = 300;
  s.weight_dtype = DType::Q4_0;
  s.embedding_dtype = DType::Q8_0;
  return s;
}

std::vector<float> run_steps(Model& model) {
  auto kv = model.new_kv_cache(0);
  const int32_t n_vocab = model.hparams().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  const std::vector<int32_t> prompt = {1, 17, 250, 3, 99};
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4};
  const int32_t last = 4;
  model.forward({prompt, pos, std::span(&last, 1)}, *kv, logits);
  for (int32_t step = 0; step < 2; ++step) {
    const int32_t t = 7 + step, p = kv->size(), row = 0;
    model.forward({std::span(&t, 1), std::span(&p, 1), std::span(&row, 1)}, *kv, logits);
  }
  return logits;
}

TEST(OpProfileTest, CountsStepsAndOpsByKind) {
  test::TempFile tmp("op_profile");
  const auto file = test::write_and_open(make_synthetic_model(tiny()), tmp);
  OpProfile profile;
  ModelOptions opts = test::options(2);
  opts.profile = &profile;
  auto profiled = Model::load(file, opts);
  auto plain = Model::load(file, test::options(2));
  EXPECT_EQ(run_steps(*profiled), run_steps(*plain));

  const auto kind = [](StepKind k) { return static_cast<size_t>(k); };
  const auto op = [](ProfiledOp o) { return static_cast<size_t>(o); };
  EXPECT_EQ(profile.steps[kind(StepKind::Prefill)].calls, 1);
  EXPECT_EQ(profile.steps[kind(StepKind::Decode)].calls, 2);
  // Q, K, V and gate, up are one matmul each where the kernel level stacks them.
  const bool stacked = cpu::packed_weight_dtype(cpu::kernel_table(selected_isa()),
                                                tiny().weight_dtype) != tiny().weight_dtype;
  const int64_t matmuls_per_step = (stacked ? 4 : 7) * tiny().n_layer + 1;
  EXPECT_EQ(profile.ops[kind(StepKind::Prefill)][op(ProfiledOp::Matmul)].calls, matmuls_per_step);
  EXPECT_EQ(profile.ops[kind(StepKind::Decode)][op(ProfiledOp::Matmul)].calls,
            2 * matmuls_per_step);
  for (size_t k = 0; k < OpProfile::kKinds; ++k) {
    int64_t in_ops = 0;
    for (const auto& cell : profile.ops[k]) in_ops += cell.ns;
    EXPECT_GT(in_ops, 0);
    EXPECT_LE(in_ops, profile.steps[k].ns) << "ops took longer than their steps";
  }
  const std::string report = profile.report();
  EXPECT_NE(report.find("decode steps: 2"), std::string::npos) << report;
  EXPECT_NE(report.find("prefill steps: 1"), std::string::npos) << report;
  EXPECT_NE(report.find("matmul"), std::string::npos) << report;
}

}  // namespace
}  // namespace tokamak::op_profile_test
