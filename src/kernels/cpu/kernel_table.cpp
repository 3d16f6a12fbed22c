#include "kernels/cpu/kernel_table.h"

#include <cassert>

namespace tokamak::cpu {

const KernelTable& kernel_table(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return scalar_kernel_table();
    case Isa::Avx2:
      return avx2_kernel_table();
    case Isa::AvxVnni:
      return avxvnni_kernel_table();
    case Isa::Avx512:
      return avx512_kernel_table(cpu_features().avx512_bf16);
    case Isa::Amx:
      return amx_kernel_table(cpu_features().avx512_bf16);
  }
  assert(false && "unknown ISA");
  return scalar_kernel_table();
}

}  // namespace tokamak::cpu
