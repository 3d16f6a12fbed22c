#pragma once
// A float64 reference of the llama forward pass for tests: plain loops over dequantized
// weights, its own RoPE (theta = pos * freq_scale * base^(-2i/n_rot) on adjacent pairs),
// causal softmax attention with grouped KV heads, RMS norms and SwiGLU. No cache, no
// quantized activations: the model under test must come within a per-dtype tolerance.

#include <cmath>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/cpu/quantize.h"
#include "model/hparams.h"

namespace tokamak::test {

class ReferenceLlama {
 public:
  explicit ReferenceLlama(const gguf::File& f) : hp_(HParams::from_gguf(f)) {
    embd_ = load(f, "token_embd.weight");
    out_norm_ = load(f, "output_norm.weight");
    out_ = f.find_tensor("output.weight") ? load(f, "output.weight") : embd_;
    for (int l = 0; l < hp_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      layers_.push_back({load(f, p + "attn_norm.weight"), load(f, p + "attn_q.weight"),
                         load(f, p + "attn_k.weight"), load(f, p + "attn_v.weight"),
                         load(f, p + "attn_output.weight"), load(f, p + "ffn_norm.weight"),
                         load(f, p + "ffn_gate.weight"), load(f, p + "ffn_up.weight"),
                         load(f, p + "ffn_down.weight")});
    }
  }

  const HParams& hparams() const { return hp_; }

  // Logits (n_tokens, n_vocab) for tokens at positions 0, 1, ...
  std::vector<double> forward(const std::vector<int32_t>& tokens) const {
    const int64_t t = static_cast<int64_t>(tokens.size());
    const int64_t e = hp_.n_embd;
    std::vector<double> x(static_cast<size_t>(t * e));
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t c = 0; c < e; ++c) x[i * e + c] = embd_[tokens[i] * e + c];
    }
    const int64_t dk = hp_.head_dim_k, dv = hp_.head_dim_v;
    const int64_t group = hp_.n_head / hp_.n_head_kv;
    for (const Layer& L : layers_) {
      const auto h = rmsnorm(x, L.attn_norm, t);
      auto q = matmul(h, L.wq, t, e, hp_.q_dim());
      auto k = matmul(h, L.wk, t, e, hp_.k_dim());
      const auto v = matmul(h, L.wv, t, e, hp_.v_dim());
      rope(q, t, hp_.n_head, dk);
      rope(k, t, hp_.n_head_kv, dk);
      std::vector<double> att(static_cast<size_t>(t * hp_.attn_out_dim()), 0.0);
      const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t hd = 0; hd < hp_.n_head; ++hd) {
          const int64_t hk = hd / group;
          std::vector<double> s(static_cast<size_t>(i + 1));
          double mx = -1e300;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0.0;
            for (int64_t c = 0; c < dk; ++c) {
              dot += q[(i * hp_.n_head + hd) * dk + c] * k[(j * hp_.n_head_kv + hk) * dk + c];
            }
            s[j] = dot * scale;
            mx = std::max(mx, s[j]);
          }
          double sum = 0.0;
          for (double& w : s) sum += (w = std::exp(w - mx));
          for (int64_t j = 0; j <= i; ++j) {
            for (int64_t c = 0; c < dv; ++c) {
              att[(i * hp_.n_head + hd) * dv + c] +=
                  s[j] / sum * v[(j * hp_.n_head_kv + hk) * dv + c];
            }
          }
        }
      }
      const auto o = matmul(att, L.wo, t, hp_.attn_out_dim(), e);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      const auto h2 = rmsnorm(x, L.ffn_norm, t);
      auto g = matmul(h2, L.w_gate, t, e, hp_.n_ff);
      const auto u = matmul(h2, L.w_up, t, e, hp_.n_ff);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const auto d = matmul(g, L.w_down, t, hp_.n_ff, e);
      for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
    }
    const auto h = rmsnorm(x, out_norm_, t);
    return matmul(h, out_, t, e, hp_.n_vocab);
  }

 private:
  struct Layer {
    std::vector<double> attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };

  static std::vector<double> load(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (t == nullptr) throw std::runtime_error("reference: missing " + name);
    const int64_t row = t->shape[0];
    const int64_t rows = t->n_elements() / row;
    std::vector<float> tmp(static_cast<size_t>(row));
    std::vector<double> out;
    out.reserve(static_cast<size_t>(row * rows));
    for (int64_t r = 0; r < rows; ++r) {
      cpu::dequantize_row(t->dtype, t->data + static_cast<size_t>(r) * row_bytes(t->dtype, row),
                          tmp.data(), row);
      out.insert(out.end(), tmp.begin(), tmp.end());
    }
    return out;
  }

  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w,
                              int64_t t) const {
    const int64_t e = hp_.n_embd;
    std::vector<double> y(x.size());
    for (int64_t i = 0; i < t; ++i) {
      double ss = 0.0;
      for (int64_t c = 0; c < e; ++c) ss += x[i * e + c] * x[i * e + c];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(e) + hp_.rms_eps);
      for (int64_t c = 0; c < e; ++c) y[i * e + c] = x[i * e + c] * inv * w[c];
    }
    return y;
  }

  // y (t, n) = x (t, k) · wᵀ with w (n, k).
  static std::vector<double> matmul(const std::vector<double>& x, const std::vector<double>& w,
                                    int64_t t, int64_t k, int64_t n) {
    std::vector<double> y(static_cast<size_t>(t * n), 0.0);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) s += x[i * k + p] * w[j * k + p];
        y[i * n + j] = s;
      }
    }
    return y;
  }

  void rope(std::vector<double>& x, int64_t t, int64_t heads, int64_t dim) const {
    const double scale = 1.0 / hp_.rope_scaling_factor;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        double* v = &x[(i * heads + h) * dim];
        for (int64_t c = 0; c < hp_.n_rot; c += 2) {
          const double theta = static_cast<double>(i) * scale *
                               std::pow(static_cast<double>(hp_.rope_freq_base),
                                        -static_cast<double>(c) / hp_.n_rot);
          const double a = v[c], b = v[c + 1];
          v[c] = a * std::cos(theta) - b * std::sin(theta);
          v[c + 1] = a * std::sin(theta) + b * std::cos(theta);
        }
      }
    }
  }

  HParams hp_;
  std::vector<double> embd_, out_norm_, out_;
  std::vector<Layer> layers_;
};

}  // namespace tokamak::test
