#include "kernels/cpu/embedding.h"

#include "kernels/cpu/quantize.h"

namespace tokamak::cpu {

void embedding_row(DType dtype, const void* table, size_t row_stride, int64_t id, int64_t n,
                   float* out) {
  const auto* row = static_cast<const uint8_t*>(table) + static_cast<size_t>(id) * row_stride;
  dequantize_row(dtype, row, out, n);
}

}  // namespace tokamak::cpu
