#include "core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tokamak {
namespace {

// Linux keeps AMX's 8 KiB of tile data off by default: a process asks for it once
// (arch_prctl ARCH_REQ_XCOMP_PERM, feature 18, XTILEDATA; Linux 5.16+), for all its threads.
// Without the grant the first tile instruction faults, so AMX counts as absent.
bool grant_amx_tile_data() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

uint64_t read_xcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1u;
  const bool avx = (ecx >> 28) & 1u;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6u) == 0x6u;       // XMM and YMM state
  const bool os_avx512 = (xcr0 & 0xe6u) == 0xe6u;  // plus opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000u) == 0x60000u;  // XTILECFG and XTILEDATA
  if (!os_avx) return f;
  f.fma = (ecx >> 12) & 1u;
  f.f16c = (ecx >> 29) & 1u;

  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx >> 5) & 1u;
  if (os_avx512) {
    f.avx512f = (ebx >> 16) & 1u;
    f.avx512dq = (ebx >> 17) & 1u;
    f.avx512bw = (ebx >> 30) & 1u;
    f.avx512vl = (ebx >> 31) & 1u;
    f.avx512_vnni = (ecx >> 11) & 1u;
  }
  if (os_amx && ((edx >> 24) & 1u) && ((edx >> 25) & 1u) && grant_amx_tile_data()) {
    f.amx_tile = true;
    f.amx_int8 = true;
  }
  const unsigned max_sub = eax;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    f.avx_vnni = (eax >> 4) & 1u;
    if (os_avx512) f.avx512_bf16 = (eax >> 5) & 1u;
  }
  return f;
}

}  // namespace

bool isa_supported(const CpuFeatures& f, Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::AvxVnni:
      return isa_supported(f, Isa::Avx2) && f.avx_vnni;
    case Isa::Avx512:
      return isa_supported(f, Isa::Avx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
             f.avx512_vnni;
    case Isa::Amx:
      return isa_supported(f, Isa::Avx512) && f.amx_tile && f.amx_int8;
  }
  return false;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::AvxVnni:
      return "avxvnni";
    case Isa::Avx512:
      return "avx512";
    case Isa::Amx:
      return "amx";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : kIsaLevels) {
    if (name == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa best_isa(const CpuFeatures& f) {
  if (isa_supported(f, Isa::Amx)) return Isa::Amx;
  if (isa_supported(f, Isa::Avx512)) return Isa::Avx512;
  if (isa_supported(f, Isa::AvxVnni)) return Isa::AvxVnni;
  if (isa_supported(f, Isa::Avx2)) return Isa::Avx2;
  return Isa::Scalar;
}

Isa resolve_isa(const CpuFeatures& f, std::optional<std::string_view> requested) {
  if (!requested) return best_isa(f);
  const auto isa = parse_isa(*requested);
  if (!isa) {
    throw Error("TOKAMAK_CPU_ISA: unknown value '" + std::string(*requested) +
                "' (expected scalar, avx2, avxvnni, avx512 or amx)");
  }
  if (!isa_supported(f, *isa)) {
    throw Error("TOKAMAK_CPU_ISA: this CPU does not support " + std::string(*requested) +
                " (best available: " + std::string(isa_name(best_isa(f))) + ")");
  }
  return *isa;
}

Isa selected_isa() {
  const char* env = std::getenv("TOKAMAK_CPU_ISA");
  if (env == nullptr || *env == '\0') return resolve_isa(cpu_features(), std::nullopt);
  return resolve_isa(cpu_features(), std::string_view(env));
}

}  // namespace tokamak
