// AMX kernel table: the AVX-512 one, with the packed matmuls of 48 activation rows or more on
// AMX tiles (packed_matmul_amx.h). Same bits as the AVX-512 table everywhere.

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_matmul_amx.h"

namespace tokamak::cpu {
namespace {

KernelTable make_table(bool with_bf16) {
  KernelTable t = avx512_kernel_table(with_bf16);
  t.isa = Isa::Amx;
  t.q4_0x8 = amx::packed_matmul_q4_0;
  t.q4_1x8 = amx::packed_matmul_q4_1;
  t.q8_0x8 = amx::packed_matmul_q8_0;
  t.activation_tiles_bytes = amx::activation_tiles_bytes;
  t.pack_activation_tiles = amx::pack_activation_tiles;
  return t;
}

}  // namespace

const KernelTable& amx_kernel_table(bool with_bf16) {
  static const KernelTable with = make_table(true);
  static const KernelTable without = make_table(false);
  return with_bf16 ? with : without;
}

}  // namespace tokamak::cpu
