// AVX-VNNI kernel table: the AVX2 one, with the packed matmuls' integer sums by the
// VEX-encoded vpdpbusd (packed_matmul_avx2.inc). Same bits as the AVX2 table everywhere.
//
// Not yet on VNNI: the dot products in GGUF's layout (kernels_avx2.cpp, kquant_dots_avx2.cpp),
// which serve the types that are not repacked (Q5_1, Q5_K, a Q4_K tensor outside the range
// its Q4_1 form holds) and TOKAMAK_REPACK=0.

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_matmul_avx2.h"

namespace tokamak::cpu {

const KernelTable& avxvnni_kernel_table() {
  static const KernelTable table = [] {
    KernelTable t = avx2_kernel_table();
    t.isa = Isa::AvxVnni;
    t.q4_0x8 = avxvnni::packed_matmul_q4_0;
    t.q4_1x8 = avxvnni::packed_matmul_q4_1;
    t.q8_0x8 = avxvnni::packed_matmul_q8_0;
    t.q6_kx8 = avxvnni::packed_matmul_q6_k;
    return t;
  }();
  return table;
}

}  // namespace tokamak::cpu
