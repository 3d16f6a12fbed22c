#include "kernels/cpu/rope.h"

#include <cassert>
#include <cmath>

namespace tokamak::cpu {

void rope_cos_sin(const RopeConfig& cfg, int32_t pos, float* cos_sin) {
  assert(cfg.n_rot > 0 && cfg.n_rot % 2 == 0);
  const float theta_scale = std::pow(cfg.freq_base, -2.0f / static_cast<float>(cfg.n_rot));
  float theta = static_cast<float>(pos);
  for (int32_t i = 0; i < cfg.n_rot; i += 2) {
    const float t = cfg.freq_scale * theta;
    cos_sin[i] = std::cos(t);
    cos_sin[i + 1] = std::sin(t);
    theta *= theta_scale;
  }
}

void rope_rotate_pairs(float* v, int32_t from, int32_t to, const float* cos_sin) {
  for (int32_t i = from; i < to; i += 2) {
    const float c = cos_sin[i];
    const float s = cos_sin[i + 1];
    const float x0 = v[i];
    const float x1 = v[i + 1];
    // Fused as ggml's build fuses them (the first product of each line).
    v[i] = std::fma(x0, c, -(x1 * s));
    v[i + 1] = std::fma(x0, s, x1 * c);
  }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int32_t n_rot, const float* cos_sin) {
  assert(n_rot <= head_dim && n_rot % 2 == 0);
  for (int64_t h = 0; h < n_heads; ++h) rope_rotate_pairs(x + h * head_dim, 0, n_rot, cos_sin);
}

}  // namespace tokamak::cpu
