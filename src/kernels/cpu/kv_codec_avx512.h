#pragma once
// The q4 KV encoder's scale search (kv_codec.cpp) with AVX-512: the same arithmetic, one
// candidate scale per lane, so bitwise the same choice. Compiled with the AVX-512 flags and
// only called on CPUs that have them (kv_codec.cpp checks).

namespace tokamak::cpu::avx512 {

// kv_codec.cpp's q4_group_scale_reference for a group of 32 (rotated) values whose element of
// largest magnitude is `extreme`.
float q4_group_scale(const float* x, float extreme);

}  // namespace tokamak::cpu::avx512
