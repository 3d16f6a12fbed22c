#pragma once
// rmsnorm_scales (rmsnorm.h) on AVX-512: eight rows' sums of squares in the eight double lanes
// of a register, each lane its row's chain in its row's order, so each scale is the scalar
// one's bits (rmsnorm_avx512.cpp). Only the AVX-512 table (kernels_avx512.cpp) hands it out.

#include <cstdint>

namespace tokamak::cpu::avx512 {

void rmsnorm_scales(const float* x, int64_t x_stride, int64_t rows, int64_t n, float eps,
                    float* scales);

}  // namespace tokamak::cpu::avx512
