#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "kernels/cpu/kernel_table.h"

namespace tokamak {
namespace {

TEST(CpuFeaturesTest, ParseAndNames) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
    EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  }
  EXPECT_FALSE(parse_isa("sse2").has_value());
  EXPECT_FALSE(parse_isa("AVX2").has_value());
}

TEST(CpuFeaturesTest, BestIsaFollowsFeatures) {
  CpuFeatures none;
  EXPECT_EQ(best_isa(none), Isa::Scalar);
  CpuFeatures avx2;
  avx2.avx2 = avx2.fma = avx2.f16c = true;
  EXPECT_EQ(best_isa(avx2), Isa::Avx2);
  CpuFeatures no_fma = avx2;
  no_fma.fma = false;
  EXPECT_EQ(best_isa(no_fma), Isa::Scalar);
  CpuFeatures avx512 = avx2;
  avx512.avx512f = avx512.avx512bw = avx512.avx512vl = avx512.avx512dq = true;
  EXPECT_EQ(best_isa(avx512), Isa::Avx2);  // no VNNI
  avx512.avx512_vnni = true;
  EXPECT_EQ(best_isa(avx512), Isa::Avx512);
  CpuFeatures amx = avx512;
  amx.amx_tile = true;
  EXPECT_EQ(best_isa(amx), Isa::Avx512);  // tiles without their int8 multiply
  amx.amx_int8 = true;
  EXPECT_EQ(best_isa(amx), Isa::Amx);
  CpuFeatures amx_no_vnni = amx;
  amx_no_vnni.avx512_vnni = false;
  EXPECT_EQ(best_isa(amx_no_vnni), Isa::Avx2);  // AMX's level builds on AVX-512's
}

TEST(CpuFeaturesTest, AvxVnniIsItsOwnLevel) {
  CpuFeatures alder_lake;  // AVX2 with AVX-VNNI, no AVX-512
  alder_lake.avx2 = alder_lake.fma = alder_lake.f16c = alder_lake.avx_vnni = true;
  EXPECT_EQ(best_isa(alder_lake), Isa::AvxVnni);
  EXPECT_EQ(resolve_isa(alder_lake, "avxvnni"), Isa::AvxVnni);
  EXPECT_EQ(resolve_isa(alder_lake, "avx2"), Isa::Avx2);
  CpuFeatures no_avx2 = alder_lake;  // VNNI alone is no level
  no_avx2.avx2 = false;
  EXPECT_FALSE(isa_supported(no_avx2, Isa::AvxVnni));
  CpuFeatures zen4;  // AVX-512 VNNI without the VEX form: AVX-512 does not imply AvxVnni
  zen4.avx2 = zen4.fma = zen4.f16c = true;
  zen4.avx512f = zen4.avx512bw = zen4.avx512vl = zen4.avx512dq = zen4.avx512_vnni = true;
  EXPECT_EQ(best_isa(zen4), Isa::Avx512);
  EXPECT_FALSE(isa_supported(zen4, Isa::AvxVnni));
  EXPECT_THROW(resolve_isa(zen4, "avxvnni"), Error);
  CpuFeatures sapphire_rapids = zen4;  // both
  sapphire_rapids.avx_vnni = true;
  EXPECT_EQ(best_isa(sapphire_rapids), Isa::Avx512);
  EXPECT_EQ(parse_isa(isa_name(Isa::AvxVnni)), Isa::AvxVnni);
}

TEST(CpuFeaturesTest, ResolveRequests) {
  CpuFeatures avx2;
  avx2.avx2 = avx2.fma = avx2.f16c = true;
  EXPECT_EQ(resolve_isa(avx2, std::nullopt), Isa::Avx2);
  EXPECT_EQ(resolve_isa(avx2, "scalar"), Isa::Scalar);
  EXPECT_EQ(resolve_isa(avx2, "avx2"), Isa::Avx2);
  EXPECT_THROW(resolve_isa(avx2, "avx512"), Error);  // the CPU lacks it
  EXPECT_THROW(resolve_isa(avx2, "neon"), Error);    // unknown
  EXPECT_THROW(resolve_isa(avx2, ""), Error);
}

TEST(CpuFeaturesTest, EnvironmentSelectsLevel) {
  const char* old = std::getenv("TOKAMAK_CPU_ISA");
  const std::string saved = old ? old : "";
  setenv("TOKAMAK_CPU_ISA", "scalar", 1);
  EXPECT_EQ(selected_isa(), Isa::Scalar);
  setenv("TOKAMAK_CPU_ISA", "bogus", 1);
  EXPECT_THROW(selected_isa(), Error);
  unsetenv("TOKAMAK_CPU_ISA");
  EXPECT_EQ(selected_isa(), best_isa(cpu_features()));
  if (old) setenv("TOKAMAK_CPU_ISA", saved.c_str(), 1);
}

TEST(CpuFeaturesTest, ThisMachine) {
  const CpuFeatures& f = cpu_features();
  const Isa best = best_isa(f);
  std::printf(
      "cpu: avx2=%d fma=%d f16c=%d avx512f=%d bw=%d vl=%d dq=%d vnni=%d bf16=%d "
      "avx_vnni=%d amx_tile=%d amx_int8=%d -> %s\n",
      f.avx2, f.fma, f.f16c, f.avx512f, f.avx512bw, f.avx512vl, f.avx512dq, f.avx512_vnni,
      f.avx512_bf16, f.avx_vnni, f.amx_tile, f.amx_int8, std::string(isa_name(best)).c_str());
  EXPECT_EQ(cpu::kernel_table(best).isa, best);
  EXPECT_EQ(cpu::kernel_table(Isa::Scalar).isa, Isa::Scalar);
}

}  // namespace
}  // namespace tokamak
