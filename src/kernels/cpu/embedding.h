#pragma once
// Embedding lookup: one row of a table of any supported dtype, decoded to F32.

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace tokamak::cpu {

// out (n) = decoded row `id` of `table` (rows of n elements, row_stride bytes apart).
void embedding_row(DType dtype, const void* table, size_t row_stride, int64_t id, int64_t n,
                   float* out);

}  // namespace tokamak::cpu
