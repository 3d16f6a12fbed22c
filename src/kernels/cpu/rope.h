#pragma once
// Rotary position embedding in the convention of llama GGUF files (ggml's "normal" mode):
// within each head, adjacent pairs (x[2i], x[2i+1]) for 2i < n_rot are rotated by
//   theta_i = (pos * freq_scale) * base^(-2i / n_rot)
// and dimensions from n_rot on are left as they are. llama.cpp's converter permutes the
// Hugging Face Q/K weights so that this pair order is the right one for GGUF llama files.
// freq_scale = 1 / factor for linear RoPE scaling. Rounding follows ggml: theta_i comes from
// base^(-2/n_rot) by repeated float multiplication, cos/sin from libm, and the rotation
// x0*c - x1*s, x0*s + x1*c fuses the first product of each line.

#include <cstdint>

namespace tokamak::cpu {

struct RopeConfig {
  int32_t n_rot = 0;  // rotated dims per head, even, <= head_dim
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
};

// cos_sin (n_rot) = {cos theta_0, sin theta_0, cos theta_1, sin theta_1, ...} for `pos`.
void rope_cos_sin(const RopeConfig& cfg, int32_t pos, float* cos_sin);

// Rotates n_heads heads of head_dim floats each (head h at x + h * head_dim) in place. The
// scalar form; kernel tables hold the ISA's (KernelTable::rope_apply), which gives the same
// bits: each output is one fma of the same operands plus the same rounded product, in any
// width.
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int32_t n_rot, const float* cos_sin);

// One head's dims [from, to) (even bounds) rotated in place, scalar: rope_apply's loop, and
// the SIMD forms' tail.
void rope_rotate_pairs(float* v, int32_t from, int32_t to, const float* cos_sin);

namespace avx2 {
// The same with AVX2 + FMA, four pairs a step. Built without FMA, the scalar std::fma is a
// libm call: RoPE on the queries of a 32-sequence decode step of the default model took
// 1.6-1.9 ms of a 34-39 ms step, 0.12 ms with this (`bench throughput --profile`).
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int32_t n_rot, const float* cos_sin);
}  // namespace avx2

}  // namespace tokamak::cpu
