#include "engine/engine_options.h"

#include "engine/kv_layout.h"

namespace tokamak {

std::optional<std::string> validate(const EngineOptions& o) {
  auto range = [](const char* name, int64_t v, int64_t lo,
                  int64_t hi) -> std::optional<std::string> {
    if (v < lo || v > hi) {
      return std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
             "], got " + std::to_string(v);
    }
    return std::nullopt;
  };
  if (auto e = range("block_size", o.block_size, 1, 1024)) return e;
  if (auto e = range("max_batched_tokens", o.max_batched_tokens, 1, 1 << 20)) return e;
  if (auto e = range("max_seqs", o.max_seqs, 1, 1 << 16)) return e;
  if (auto e = range("max_model_len", o.max_model_len, 0, 1 << 24)) return e;
  if (auto e = range("lpm_max_bypass", o.lpm_max_bypass, 0, 1 << 20)) return e;
  if (o.max_waiting < 1) return std::string("max_waiting must be at least 1");
  if (o.kv_window != 0) {
    if (auto e = range("kv_window", o.kv_window, o.block_size, 1 << 24)) return e;
    if (auto e = range("kv_sink", o.kv_sink, 0, 1 << 20)) return e;
    if (auto e = range("kv_heavy", o.kv_heavy, 0, o.kv_window - o.block_size)) return e;
  } else if (o.kv_heavy != 0) {
    return std::string("kv_heavy needs kv_window");
  }
  if (auto e = range("kv_hot_window", o.kv_hot_window, 0, 1 << 24)) return e;
  const int32_t hot = hot_window_blocks(o.block_size, o.kv_dtype, o.kv_hot_window);
  if (o.kv_hot_window > 0 && !kv_dtype_is_quantized(o.kv_dtype.k) &&
      !kv_dtype_is_quantized(o.kv_dtype.v)) {
    return std::string("kv_hot_window needs a quantized kv_dtype (int8, fp8 or q4)");
  }
  if (hot > 1 && o.prefix_caching) {
    // A prefix hit would need F16 copies of cached blocks, which exist only encoded.
    return std::string("kv_hot_window wider than one block needs the prefix cache off");
  }
  if (o.kv_window > 0 && int64_t{hot} * o.block_size > o.kv_window - o.kv_heavy) {
    // The window's slides drop blocks older than the hot copies.
    return std::string(
        "kv_hot_window must fit in kv_window's recent tokens (kv_window - kv_heavy)");
  }
  const KVTierOptions& t = o.kv_tiers;
  if (t.any() && !o.prefix_caching) {
    return std::string("kv_host_bytes and kv_disk_dir need prefix_caching");
  }
  if (!t.disk_dir.empty() && t.disk_bytes == 0) {
    return std::string("kv_disk_bytes must be positive with kv_disk_dir");
  }
  if (t.disk_dir.empty() && t.disk_bytes > 0) {
    return std::string("kv_disk_bytes needs kv_disk_dir");
  }
  return std::nullopt;
}

const char* preemption_mode_name(PreemptionMode mode) {
  return mode == PreemptionMode::Swap ? "swap" : "recompute";
}

const char* schedule_policy_name(SchedulePolicy policy) {
  return policy == SchedulePolicy::Lpm ? "lpm" : "fcfs";
}

}  // namespace tokamak
