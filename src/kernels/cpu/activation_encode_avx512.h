#pragma once
// The activation encoders Q8_0 and Q8_1 (quantize.h: d = amax / 127, q = rint(x * 127 / amax),
// Q8_1's s = d * sum(q)) on AVX-512, sixteen blocks a pass (activation_encode_avx512.cpp). Each
// block's bytes are the scalar encoder's and AVX2's, so a matmul's results do not depend on the
// level that encoded its input. Only the AVX-512 table (kernels_avx512.cpp) hands them out.

#include <cstdint>

namespace tokamak::cpu::avx512 {

void to_q8_0(const float* x, void* y, int64_t n);  // n % 32 == 0
void to_q8_1(const float* x, void* y, int64_t n);

}  // namespace tokamak::cpu::avx512
