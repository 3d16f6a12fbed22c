#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"

namespace tokamak::cpu {
namespace {

using test::random_floats;

// Plain double softmax attention with the query rounded to F16, as the kernel computes it.
std::vector<double> reference(const std::vector<float>& q, const uint16_t* k, const uint16_t* v,
                              int64_t n_kv, int32_t dk, int32_t dv, int64_t stride, float scale) {
  std::vector<double> s(n_kv);
  double mx = -1e300;
  for (int64_t j = 0; j < n_kv; ++j) {
    double dot = 0.0;
    for (int32_t i = 0; i < dk; ++i) {
      dot += static_cast<double>(fp16_to_f32(f32_to_fp16(q[i]))) * fp16_to_f32(k[j * stride + i]);
    }
    s[j] = dot * scale;
    mx = std::max(mx, s[j]);
  }
  double sum = 0.0;
  for (double& x : s) {
    x = std::exp(x - mx);
    sum += x;
  }
  std::vector<double> out(dv, 0.0);
  for (int64_t j = 0; j < n_kv; ++j) {
    for (int32_t i = 0; i < dv; ++i) out[i] += s[j] / sum * fp16_to_f32(v[j * stride + i]);
  }
  return out;
}

TEST(AttentionTest, MatchesSoftmaxReferenceAcrossTiles) {
  std::vector<const KernelTable*> tables{&scalar_kernel_table()};
  for (const auto& nt : test::simd_tables()) tables.push_back(nt.table);
  for (const KernelTable* kt : tables) {
    for (int32_t dk : {8, 64}) {
      const int32_t dv = dk;
      const int64_t stride = 3 * dk;  // rows hold three heads; we read the second
      for (int64_t n_kv : {1, 2, 31, 32, 33, 64, 100}) {
        const auto q = random_floats(dk, n_kv, -2.0f, 2.0f);
        const auto kf = random_floats(static_cast<size_t>(n_kv * stride), n_kv + 1, -2.0f, 2.0f);
        const auto vf = random_floats(static_cast<size_t>(n_kv * stride), n_kv + 2);
        std::vector<uint16_t> k(kf.size()), v(vf.size());
        for (size_t i = 0; i < kf.size(); ++i) k[i] = f32_to_fp16(kf[i]);
        for (size_t i = 0; i < vf.size(); ++i) v[i] = f32_to_fp16(vf[i]);
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        const auto ref = reference(q, k.data() + dk, v.data() + dk, n_kv, dk, dv, stride, scale);
        for (bool single : {false, true}) {
          std::vector<float> out(dv);
          attention_head(*kt, q.data(), k.data() + dk, stride, v.data() + dk, stride, n_kv, dk, dv,
                         scale, single, out.data());
          // The probabilities are rounded to F16 before the value sum (as llama.cpp does).
          for (int32_t i = 0; i < dv; ++i) {
            EXPECT_NEAR(out[i], ref[i], 2e-3) << isa_name(kt->isa) << " n_kv " << n_kv;
          }
        }
      }
    }
  }
}

TEST(AttentionTest, OneKeyReturnsItsValue) {
  const int32_t d = 16;
  const auto q = random_floats(d, 1);
  std::vector<uint16_t> k(d), v(d);
  for (int i = 0; i < d; ++i) {
    k[i] = f32_to_fp16(0.1f * static_cast<float>(i));
    v[i] = f32_to_fp16(static_cast<float>(i) - 3.0f);
  }
  std::vector<float> out(d);
  attention_head(scalar_kernel_table(), q.data(), k.data(), d, v.data(), d, 1, d, d, 0.25f, false,
                 out.data());
  for (int i = 0; i < d; ++i) EXPECT_EQ(out[i], static_cast<float>(i) - 3.0f);
}

// Every SIMD attention kernel equals the scalar one bit for bit, in both summation orders.
TEST(AttentionTest, SimdEqualsScalarBitwise) {
  for (const auto& [name, kt] : test::simd_tables()) {
    for (int32_t dk : {8, 20, 64, 96}) {
      for (int64_t n_kv : {1, 5, 8, 9, 31, 32, 33, 70, 257}) {
        const auto q = random_floats(dk, n_kv + dk, -3.0f, 3.0f);
        const auto kf = random_floats(static_cast<size_t>(n_kv * dk), n_kv + 1, -2.0f, 2.0f);
        const auto vf = random_floats(static_cast<size_t>(n_kv * dk), n_kv + 2);
        std::vector<uint16_t> k(kf.size()), v(vf.size());
        for (size_t i = 0; i < kf.size(); ++i) k[i] = f32_to_fp16(kf[i]);
        for (size_t i = 0; i < vf.size(); ++i) v[i] = f32_to_fp16(vf[i]);
        for (bool single : {false, true}) {
          std::vector<float> a(dk), b(dk);
          attention_head(scalar_kernel_table(), q.data(), k.data(), dk, v.data(), dk, n_kv, dk, dk,
                         0.125f, single, a.data());
          attention_head(*kt, q.data(), k.data(), dk, v.data(), dk, n_kv, dk, dk, 0.125f, single,
                         b.data());
          EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
              << name << " dk " << dk << " n_kv " << n_kv << " single " << single;
        }
      }
    }
  }
}

// silu * up: SIMD equals scalar bit for bit, and both are close to the exact function, also
// where exp under- or overflows.
TEST(AttentionTest, SiluMulSimdEqualsScalar) {
  auto g = random_floats(1000, 3, -20.0f, 20.0f);
  g[0] = -100.0f;
  g[1] = 100.0f;
  g[2] = -89.0f;
  g[3] = 0.0f;
  const auto u = random_floats(1000, 4);
  std::vector<float> ref(1000);
  scalar_kernel_table().silu_mul(g.data(), u.data(), ref.data(), 1000);
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    EXPECT_NEAR(ref[i], want, 1e-6 * (1.0 + std::fabs(want))) << g[i];
  }
  for (const auto& [name, kt] : test::simd_tables()) {
    for (int64_t n : {1, 7, 8, 9, 1000}) {
      std::vector<float> out(static_cast<size_t>(n));
      kt->silu_mul(g.data(), u.data(), out.data(), n);
      std::vector<float> want(static_cast<size_t>(n));
      scalar_kernel_table().silu_mul(g.data(), u.data(), want.data(), n);
      EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * 4), 0) << name << " n " << n;
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu
