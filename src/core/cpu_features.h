#pragma once
// What the CPU can do (from CPUID and XGETBV) and which SIMD level the kernels use. The level
// is the best the CPU supports unless the environment variable TOKAMAK_CPU_ISA asks for a
// lower one (scalar | avx2 | avxvnni | avx512 | amx), e.g. to compare kernels or to reproduce a
// result of another machine. Kernel files compiled for a level are only ever called at that level.

#include <optional>
#include <string_view>

namespace tokamak {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx_vnni = false;
  bool amx_tile = false;  // AMX with its tile state enabled by the OS and granted to this process
  bool amx_int8 = false;
};

// SIMD levels, in increasing order. Avx2 needs AVX2+FMA+F16C; AvxVnni needs Avx2 and AVX-VNNI
// (vpdpbusd on 256-bit registers, VEX-encoded: Intel Alder Lake and later client cores, Sierra
// Forest, AMD Zen 5); Avx512 needs Avx2, F/BW/VL/DQ and AVX512-VNNI (not AVX-VNNI, which Ice
// Lake servers and Zen 4 lack: the order is of speed, a level does not always imply the one
// below it, so ask isa_supported rather than compare). BF16 is optional: its kernels check
// `avx512_bf16` themselves. Amx needs Avx512 and AMX-TILE + AMX-INT8 usable by this process
// (Linux grants the tile state on request, which detection makes: arch_prctl
// ARCH_REQ_XCOMP_PERM).
enum class Isa { Scalar = 0, Avx2 = 1, AvxVnni = 2, Avx512 = 3, Amx = 4 };
// Every level, in that order: what a loop over the levels walks, so that none is left out.
inline constexpr Isa kIsaLevels[] = {Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512, Isa::Amx};

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);  // "scalar" | "avx2" | "avxvnni" | ...

// Whether `f` has what level `isa` needs.
bool isa_supported(const CpuFeatures& f, Isa isa);

// Features of this CPU, read once (OS support for the register state included).
const CpuFeatures& cpu_features();

// The best level that `f` supports.
Isa best_isa(const CpuFeatures& f);

// The level chosen for `f` when `requested` names one (an environment value, say): it must
// name a known level that `f` supports, else Error. With no request, best_isa(f).
Isa resolve_isa(const CpuFeatures& f, std::optional<std::string_view> requested);

// resolve_isa(cpu_features(), $TOKAMAK_CPU_ISA), evaluated on every call (cheap); throws
// Error for a bad value.
Isa selected_isa();

}  // namespace tokamak
