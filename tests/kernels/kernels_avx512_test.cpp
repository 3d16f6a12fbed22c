// The AVX-512 table's plain-type dots that must give AVX2's bits: F16 (the F16 golden test
// against llama.cpp's AVX2 build runs on whichever level the CPU has). Skipped without AVX-512.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"

namespace tokamak::cpu {
namespace {

TEST(KernelsAvx512Test, F16DotEqualsAvx2Bitwise) {
  const KernelTable* avx2 = nullptr;
  std::vector<const KernelTable*> avx512;
  for (const auto& nt : test::simd_tables()) {
    if (nt.table->isa == Isa::Avx2) avx2 = nt.table;
    if (nt.table->isa == Isa::Avx512) avx512.push_back(nt.table);
  }
  if (avx2 == nullptr || avx512.empty()) GTEST_SKIP() << "needs AVX2 and AVX-512";
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= 70; ++n) sizes.push_back(n);
  for (int64_t n : {127, 128, 129, 576, 1536, 2049, 4099}) sizes.push_back(n);
  for (int64_t n : sizes) {
    const auto wf = test::random_floats(static_cast<size_t>(4 * n), n, -2.0f, 2.0f);
    const auto xf = test::random_floats(static_cast<size_t>(n), n + 1, -3.0f, 3.0f);
    std::vector<uint16_t> w(wf.size()), x(xf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_fp16(wf[i]);
    for (size_t i = 0; i < x.size(); ++i) x[i] = f32_to_fp16(xf[i]);
    const size_t ws = static_cast<size_t>(n) * sizeof(uint16_t);
    float want[4];
    avx2->f16.dot4(n, w.data(), ws, x.data(), want);
    for (const KernelTable* kt : avx512) {
      float got[4];
      kt->f16.dot4(n, w.data(), ws, x.data(), got);
      EXPECT_EQ(std::memcmp(got, want, sizeof(got)), 0) << "n=" << n;
      const float one = kt->f16.dot(n, w.data(), x.data());
      EXPECT_EQ(std::memcmp(&one, &want[0], sizeof(float)), 0) << "n=" << n;
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu
