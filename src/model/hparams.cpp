#include "model/hparams.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "core/error.h"
#include "format/gguf.h"

namespace tokamak {
namespace {

// Upper bounds that no real model reaches; larger values are taken as corruption.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxContext = int64_t{1} << 24;

class Reader {
 public:
  Reader(const gguf::File& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(file_.path() + ": " + what); }

  std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }

  std::optional<int64_t> get_int(const std::string& suffix) const {
    try {
      return file_.get_int(key(suffix));
    } catch (const Error& e) {
      fail("metadata " + key(suffix) + ": " + e.what());
    }
  }

  std::optional<double> get_float(const std::string& suffix) const {
    try {
      return file_.get_float(key(suffix));
    } catch (const Error& e) {
      fail("metadata " + key(suffix) + ": " + e.what());
    }
  }

  int32_t positive(const std::string& suffix, std::optional<int64_t> value, int64_t max) const {
    if (!value) fail("missing metadata key " + key(suffix));
    if (*value <= 0 || *value > max) {
      fail("metadata " + key(suffix) + " = " + std::to_string(*value) + " is out of range [1, " +
           std::to_string(max) + "]");
    }
    return static_cast<int32_t>(*value);
  }

  int32_t required(const std::string& suffix, int64_t max) const {
    return positive(suffix, get_int(suffix), max);
  }

  int32_t optional(const std::string& suffix, int64_t fallback, int64_t max) const {
    const auto v = get_int(suffix);
    return positive(suffix, v ? v : std::optional<int64_t>(fallback), max);
  }

  float positive_float(const std::string& suffix, std::optional<double> value) const {
    if (!value) fail("missing metadata key " + key(suffix));
    if (!std::isfinite(*value) || *value <= 0.0 ||
        *value > static_cast<double>(std::numeric_limits<float>::max())) {
      fail("metadata " + key(suffix) + " = " + std::to_string(*value) +
           " must be a positive finite number");
    }
    return static_cast<float>(*value);
  }

 private:
  const gguf::File& file_;
  std::string arch_;
};

}  // namespace

HParams HParams::from_gguf(const gguf::File& file) {
  HParams hp;
  std::optional<std::string> arch;
  try {
    arch = file.get_string("general.architecture");
  } catch (const Error& e) {
    throw Error(file.path() + ": metadata general.architecture: " + e.what());
  }
  if (!arch || arch->empty()) throw Error(file.path() + ": missing metadata general.architecture");
  hp.arch = *arch;
  const Reader r(file, hp.arch);

  hp.n_layer = r.required("block_count", kMaxLayers);
  hp.n_embd = r.required("embedding_length", kMaxDim);
  hp.n_ff = r.required("feed_forward_length", kMaxDim);
  hp.n_ctx_train = r.required("context_length", kMaxContext);
  hp.n_head = r.required("attention.head_count", kMaxDim);
  hp.n_head_kv = r.optional("attention.head_count_kv", hp.n_head, kMaxDim);
  if (hp.n_head % hp.n_head_kv != 0) {
    r.fail("attention.head_count (" + std::to_string(hp.n_head) +
           ") is not a multiple of attention.head_count_kv (" + std::to_string(hp.n_head_kv) + ")");
  }
  const bool has_k = r.get_int("attention.key_length").has_value();
  const bool has_v = r.get_int("attention.value_length").has_value();
  if ((!has_k || !has_v) && hp.n_embd % hp.n_head != 0) {
    r.fail("embedding_length (" + std::to_string(hp.n_embd) +
           ") is not a multiple of attention.head_count (" + std::to_string(hp.n_head) +
           ") and no attention.key_length / value_length is given");
  }
  hp.head_dim_k = r.optional("attention.key_length", hp.n_embd / hp.n_head, kMaxDim);
  hp.head_dim_v = r.optional("attention.value_length", hp.n_embd / hp.n_head, kMaxDim);
  if (hp.head_dim_k > 512 || hp.head_dim_v > 512) {
    r.fail("head dimension " + std::to_string(std::max(hp.head_dim_k, hp.head_dim_v)) +
           " is larger than the supported 512");
  }
  hp.n_rot = r.optional("rope.dimension_count", hp.head_dim_k, kMaxDim);
  if (hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim_k) {
    r.fail("rope.dimension_count (" + std::to_string(hp.n_rot) +
           ") must be even and at most the key head dimension (" + std::to_string(hp.head_dim_k) +
           ")");
  }
  hp.rms_eps = r.positive_float("attention.layer_norm_rms_epsilon",
                                r.get_float("attention.layer_norm_rms_epsilon"));
  const auto base = r.get_float("rope.freq_base");
  hp.rope_freq_base = base ? r.positive_float("rope.freq_base", base) : 10000.0f;

  // RoPE scaling: rope.scaling.type (none | linear) with rope.scaling.factor, or the older
  // rope.scale_linear.
  std::optional<std::string> scaling_type;
  try {
    scaling_type = file.get_string(r.key("rope.scaling.type"));
  } catch (const Error& e) {
    r.fail("metadata " + r.key("rope.scaling.type") + ": " + e.what());
  }
  const auto factor = r.get_float("rope.scaling.factor");
  const auto scale_linear = r.get_float("rope.scale_linear");
  if (scaling_type && *scaling_type != "none" && *scaling_type != "linear") {
    r.fail("unsupported RoPE scaling type '" + *scaling_type + "' (supported: none, linear)");
  }
  if (scaling_type && *scaling_type == "linear") {
    hp.rope_scaling = RopeScaling::Linear;
    hp.rope_scaling_factor = r.positive_float("rope.scaling.factor", factor);
  } else if (!scaling_type && scale_linear) {
    hp.rope_scaling_factor = r.positive_float("rope.scale_linear", scale_linear);
    hp.rope_scaling = hp.rope_scaling_factor == 1.0f ? RopeScaling::None : RopeScaling::Linear;
  }
  if (file.find_tensor("rope_freqs.weight") != nullptr) {
    r.fail("tensor rope_freqs.weight (per-frequency RoPE factors) is not supported");
  }

  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) r.fail("missing tensor token_embd.weight");
  if (embd->shape.size() != 2 || embd->shape[0] != hp.n_embd || embd->shape[1] <= 0 ||
      embd->shape[1] > std::numeric_limits<int32_t>::max()) {
    r.fail("tensor token_embd.weight has shape " +
           [&] {
             std::string s = "[";
             for (size_t i = 0; i < embd->shape.size(); ++i) {
               s += (i ? ", " : "") + std::to_string(embd->shape[i]);
             }
             return s + "]";
           }() +
           ", expected [" + std::to_string(hp.n_embd) + ", n_vocab]");
  }
  hp.n_vocab = static_cast<int32_t>(embd->shape[1]);
  const auto vocab_size = r.get_int("vocab_size");
  if (vocab_size && *vocab_size != hp.n_vocab) {
    r.fail("metadata " + r.key("vocab_size") + " = " + std::to_string(*vocab_size) +
           " does not match the " + std::to_string(hp.n_vocab) + " rows of token_embd.weight");
  }
  return hp;
}

}  // namespace tokamak
