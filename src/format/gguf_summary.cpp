#include "format/gguf_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <type_traits>

#include "core/error.h"

namespace tokamak::gguf {
namespace {

[[noreturn]] void bad_key(const File& f, const std::string& key, const std::string& problem) {
  throw Error(f.path() + ": metadata '" + escape(key, 64) + "': " + problem);
}

// An integer, or for a per-layer array of integers its largest item.
std::optional<int64_t> read_count(const File& f, const std::string& key) {
  const Value* v = f.find(key);
  if (v == nullptr || !v->is_array()) return f.get_int(key);
  std::optional<int64_t> largest;
  for (const auto& item : v->as_array()) {
    if (!item.is_integer()) {
      bad_key(f, key,
              std::string("expected integers, found an array of ") + value_type_name(item.type()));
    }
    try {
      const int64_t x = item.as_i64();
      if (!largest || x > *largest) largest = x;
    } catch (const Error& e) {
      bad_key(f, key, e.what());
    }
  }
  return largest;
}

std::string number(double v) {
  // A float32 value prints in its shortest float form (1e-05, not 9.99999974737875e-06).
  if (static_cast<double>(static_cast<float>(v)) == v) {
    return fmt::format("{}", static_cast<float>(v));
  }
  return fmt::format("{}", v);
}

template <typename T>
std::string opt(const std::optional<T>& v) {
  if (!v) return "-";
  if constexpr (std::is_same_v<T, double>) {
    return number(*v);
  } else {
    return fmt::format("{}", *v);
  }
}

void line(std::string& out, std::string_view label, std::string_view value) {
  out += fmt::format("{:<16}{}\n", std::string(label) + ":", value);
}

void param(std::string& out, std::string_view label, std::string_view value) {
  out += fmt::format("  {:<22}{}\n", label, value);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, kUnits[unit]);
}

std::string format_count(uint64_t count) {
  if (count < 1000) return fmt::format("{}", count);
  constexpr const char* kUnits[] = {"K", "M", "B", "T", "P", "E"};
  double v = static_cast<double>(count) / 1000;
  size_t unit = 0;
  while (v >= 1000 && unit + 1 < std::size(kUnits)) {
    v /= 1000;
    ++unit;
  }
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, kUnits[unit]);
}

ModelSummary summarize(const File& f) {
  ModelSummary s;
  s.path = f.path();
  s.file_size = f.file_size();
  s.version = f.version();
  s.alignment = f.alignment();
  s.metadata_count = f.metadata().size();
  s.architecture = f.get_string("general.architecture");
  s.name = f.get_string("general.name");

  if (s.architecture) {
    const std::string a = *s.architecture + ".";
    s.context_length = read_count(f, a + "context_length");
    s.embedding_length = read_count(f, a + "embedding_length");
    s.block_count = read_count(f, a + "block_count");
    s.feed_forward_length = read_count(f, a + "feed_forward_length");
    s.head_count = read_count(f, a + "attention.head_count");
    s.head_count_kv = read_count(f, a + "attention.head_count_kv");
    s.head_dim = read_count(f, a + "attention.key_length");
    if (!s.head_dim && s.embedding_length && s.head_count && *s.head_count > 0) {
      s.head_dim = *s.embedding_length / *s.head_count;
      s.head_dim_derived = true;
    }
    s.rope_freq_base = f.get_float(a + "rope.freq_base");
    s.rope_dimension_count = read_count(f, a + "rope.dimension_count");
    s.rope_scaling_type = f.get_string(a + "rope.scaling.type");
    s.rope_scaling_factor = f.get_float(a + "rope.scaling.factor");
    if (!s.rope_scaling_factor) {
      // Older files: a linear factor under its own key.
      s.rope_scaling_factor = f.get_float(a + "rope.scale_linear");
      if (s.rope_scaling_factor && !s.rope_scaling_type) s.rope_scaling_type = "linear";
    }
    s.rope_original_context_length = read_count(f, a + "rope.scaling.original_context_length");
    s.rms_epsilon = f.get_float(a + "attention.layer_norm_rms_epsilon");
    s.norm_epsilon = f.get_float(a + "attention.layer_norm_epsilon");
    s.vocab_size = read_count(f, a + "vocab_size");
  }

  std::map<DType, TensorTypeStats> by_type;
  for (const auto& t : f.tensors()) {
    auto& stats = by_type[t.dtype];
    stats.dtype = t.dtype;
    ++stats.tensors;
    // No overflow: the reader keeps every tensor's bytes inside the file, and no type packs
    // more than a few elements in a byte, so the sums stay far below 2^64.
    stats.elements += static_cast<uint64_t>(t.n_elements());
    stats.bytes += t.nbytes;
    s.parameter_count += static_cast<uint64_t>(t.n_elements());
    s.weight_bytes += t.nbytes;
  }
  s.tensor_count = f.tensors().size();
  for (const auto& [dtype, stats] : by_type) s.tensor_types.push_back(stats);
  std::stable_sort(
      s.tensor_types.begin(), s.tensor_types.end(),
      [](const TensorTypeStats& a, const TensorTypeStats& b) { return a.tensors > b.tensors; });

  s.tokenizer_model = f.get_string("tokenizer.ggml.model");
  s.tokenizer_pre = f.get_string("tokenizer.ggml.pre");
  const Value::Array* tokens = f.get_array("tokenizer.ggml.tokens");
  if (tokens) s.token_count = static_cast<int64_t>(tokens->size());
  if (!s.vocab_size) s.vocab_size = s.token_count;
  constexpr std::pair<const char*, const char*> kSpecial[] = {
      {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
      {"eot", "tokenizer.ggml.eot_token_id"},     {"unk", "tokenizer.ggml.unknown_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"},
  };
  for (const auto& [role, key] : kSpecial) {
    const auto id = f.get_int(key);
    if (!id) continue;
    SpecialToken token{role, *id, std::nullopt};
    if (tokens && *id >= 0 && static_cast<uint64_t>(*id) < tokens->size()) {
      const Value& text = (*tokens)[static_cast<size_t>(*id)];
      if (text.is_string()) token.text = text.as_string();
    }
    s.special_tokens.push_back(std::move(token));
  }
  s.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  s.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
  if (const auto tmpl = f.get_string("tokenizer.chat_template")) {
    s.chat_template_bytes = tmpl->size();
  }
  return s;
}

std::string format_summary(const ModelSummary& s) {
  std::string out;
  line(out, "file", s.path);
  line(out, "size", fmt::format("{} ({} bytes)", format_bytes(s.file_size), s.file_size));
  line(out, "format",
       fmt::format("GGUF v{}, alignment {}, {} metadata keys", s.version, s.alignment,
                   s.metadata_count));
  line(out, "architecture",
       s.architecture ? escape(*s.architecture) : "- (no general.architecture)");
  line(out, "name", s.name ? escape(*s.name) : "-");

  if (s.architecture) {
    out += fmt::format("hyper-parameters ({}.*):\n", escape(*s.architecture));
    param(out, "context length", opt(s.context_length));
    param(out, "embedding length", opt(s.embedding_length));
    param(out, "block count", opt(s.block_count));
    param(out, "feed-forward length", opt(s.feed_forward_length));
    param(out, "head count", opt(s.head_count));
    param(out, "KV head count", opt(s.head_count_kv));
    param(out, "head dim", opt(s.head_dim) + (s.head_dim_derived ? " (embedding / heads)" : ""));
    param(out, "RoPE base", opt(s.rope_freq_base));
    param(out, "RoPE dimension", opt(s.rope_dimension_count));
    std::string scaling = "none";
    if (s.rope_scaling_type && *s.rope_scaling_type != "none") {
      scaling = escape(*s.rope_scaling_type);
      if (s.rope_scaling_factor) scaling += fmt::format(" x{}", number(*s.rope_scaling_factor));
      if (s.rope_original_context_length) {
        scaling += fmt::format(" (original context {})", *s.rope_original_context_length);
      }
    }
    param(out, "RoPE scaling", scaling);
    if (s.rms_epsilon || !s.norm_epsilon) param(out, "RMS norm epsilon", opt(s.rms_epsilon));
    if (s.norm_epsilon) param(out, "norm epsilon", opt(s.norm_epsilon));
    param(out, "vocab size", opt(s.vocab_size));
  }

  std::string types;
  for (const auto& t : s.tensor_types) {
    if (!types.empty()) types += ", ";
    types += fmt::format("{} {}", t.tensors, dtype_name(t.dtype));
  }
  line(out, "tensors", types.empty() ? "0" : fmt::format("{} ({})", s.tensor_count, types));
  line(out, "parameters",
       fmt::format("{} ({})", format_count(s.parameter_count), s.parameter_count));
  line(out, "weight bytes",
       fmt::format("{} ({} bytes)", format_bytes(s.weight_bytes), s.weight_bytes));

  std::string tokenizer = s.tokenizer_model ? escape(*s.tokenizer_model) : "-";
  if (s.tokenizer_pre) tokenizer += fmt::format(" (pre: {})", escape(*s.tokenizer_pre));
  line(out, "tokenizer", tokenizer);
  line(out, "vocabulary", s.token_count ? fmt::format("{} tokens", *s.token_count) : "-");
  std::string special;
  for (const auto& t : s.special_tokens) {
    if (!special.empty()) special += ", ";
    special += fmt::format("{} {} ", t.role, t.id);
    special += t.text ? fmt::format("\"{}\"", escape(*t.text, 64)) : "(not in vocabulary)";
  }
  line(out, "special tokens", special.empty() ? "-" : special);
  auto flag = [](const std::optional<bool>& b) { return b ? (*b ? "yes" : "no") : "unset"; };
  line(out, "add bos/eos", fmt::format("bos {}, eos {}", flag(s.add_bos), flag(s.add_eos)));
  line(out, "chat template",
       s.chat_template_bytes ? fmt::format("present ({} bytes)", *s.chat_template_bytes) : "none");
  return out;
}

std::string describe(const File& file) { return format_summary(summarize(file)); }

std::string format_metadata(const File& file) {
  size_t width = 0;
  for (const auto& [key, value] : file.metadata())
    width = std::max(width, std::min<size_t>(key.size(), 60));
  std::string out;
  for (const auto& [key, value] : file.metadata()) {
    std::string type = value_type_name(value.type());
    if (value.is_array()) {
      type =
          fmt::format("array[{}, {}]", value_type_name(value.elem_type()), value.as_array().size());
    }
    out += fmt::format("{:<{}}  {:<20} {}\n", escape(key, 60), width, type,
                       value.to_display_string(8));
  }
  return out;
}

std::string format_tensors(const File& file) {
  size_t width = 0;
  for (const auto& t : file.tensors()) width = std::max(width, std::min<size_t>(t.name.size(), 60));
  std::string out;
  for (const auto& t : file.tensors()) {
    out += fmt::format("{:<{}}  {:<5} {:<22} {:>12}  offset {}\n", escape(t.name, 60), width,
                       dtype_name(t.dtype), shape_text(t.shape), t.nbytes, t.offset);
  }
  return out;
}

}  // namespace tokamak::gguf
