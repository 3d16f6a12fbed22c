#include "model/llama_weights.h"

#include <string>

#include "core/error.h"
#include "format/gguf.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize.h"

namespace tokamak {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

enum class Kind { Norm, Matrix, Embedding };

class Loader {
 public:
  explicit Loader(const gguf::File& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    throw Error(file_.path() + ": tensor " + name + ": " + what);
  }

  // Expected shape in GGUF order (innermost first).
  Tensor get(const std::string& name, std::vector<int64_t> ggml_shape, Kind kind,
             bool optional = false) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) {
      if (optional) return Tensor{};
      throw Error(file_.path() + ": missing tensor " + name);
    }
    if (t->shape != ggml_shape) {
      fail(name, "shape " + shape_string(t->shape) + " does not match the expected " +
                     shape_string(ggml_shape) + " (GGUF order)");
    }
    const auto dtype_ok = [&] {
      switch (kind) {
        case Kind::Norm:
          return t->dtype == DType::F32;
        case Kind::Matrix:
          return cpu::matmul_supports(t->dtype);
        case Kind::Embedding:
          return cpu::can_quantize(t->dtype) && t->dtype != DType::Q8_1;
      }
      return false;
    }();
    if (!dtype_ok) {
      fail(name, std::string("unsupported dtype ") + std::string(dtype_name(t->dtype)) +
                     (kind == Kind::Norm ? " (norm weights must be F32)"
                                         : " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                                           "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"));
    }
    return Tensor::from_ggml(t->dtype, t->shape, t->data);
  }

  void reject_if_present(const std::string& name, const std::string& why) const {
    if (file_.find_tensor(name) != nullptr) fail(name, why);
  }

 private:
  const gguf::File& file_;
};

}  // namespace

LlamaWeights LlamaWeights::load(const gguf::File& file, const HParams& hp) {
  const Loader l(file);
  LlamaWeights w;
  const int64_t e = hp.n_embd;
  w.token_embd = l.get("token_embd.weight", {e, hp.n_vocab}, Kind::Embedding);
  w.output_norm = l.get("output_norm.weight", {e}, Kind::Norm);
  w.output = l.get("output.weight", {e, hp.n_vocab}, Kind::Matrix, /*optional=*/true);
  if (w.output.data == nullptr) {
    if (!cpu::matmul_supports(w.token_embd.dtype)) {
      l.fail("token_embd.weight", "is used as the output head but its dtype " +
                                      std::string(dtype_name(w.token_embd.dtype)) +
                                      " has no matmul kernel");
    }
    w.output = w.token_embd;
    w.tied_output = true;
  }
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int32_t i = 0; i < hp.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    auto& L = w.layers[static_cast<size_t>(i)];
    L.attn_norm = l.get(p + "attn_norm.weight", {e}, Kind::Norm);
    L.wq = l.get(p + "attn_q.weight", {e, hp.q_dim()}, Kind::Matrix);
    L.wk = l.get(p + "attn_k.weight", {e, hp.k_dim()}, Kind::Matrix);
    L.wv = l.get(p + "attn_v.weight", {e, hp.v_dim()}, Kind::Matrix);
    L.wo = l.get(p + "attn_output.weight", {hp.attn_out_dim(), e}, Kind::Matrix);
    L.ffn_norm = l.get(p + "ffn_norm.weight", {e}, Kind::Norm);
    L.w_gate = l.get(p + "ffn_gate.weight", {e, hp.n_ff}, Kind::Matrix);
    L.w_up = l.get(p + "ffn_up.weight", {e, hp.n_ff}, Kind::Matrix);
    L.w_down = l.get(p + "ffn_down.weight", {hp.n_ff, e}, Kind::Matrix);
    // Tensors this forward pass would silently ignore make a different model: refuse them.
    for (const char* bias :
         {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_gate_inp.weight"}) {
      l.reject_if_present(p + bias, "is not supported by the llama forward pass");
    }
  }
  return w;
}

}  // namespace tokamak
