#pragma once
// How to run a model: threads, batch and context sizes, kernel level.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/cpu_features.h"

namespace tokamak {

class ThreadPool;
struct OpProfile;

struct ModelOptions {
  int n_threads = 0;               // kernel threads; 0 = one per CPU this process may run on
  std::vector<int> cpus;           // pin kernel thread i to cpus[i] (ThreadPool); empty: no
  ThreadPool* pool = nullptr;      // use this pool (outliving the model) instead of a new one
  int32_t max_batch_tokens = 512;  // most tokens in one forward (the prefill chunk)
  int32_t n_ctx = 0;               // default cache length; 0 = min(context_length, 4096)
  std::optional<Isa> isa;          // kernel level; default selected_isa() (TOKAMAK_CPU_ISA)
  // Reproduce llama.cpp bit for bit, including its single-token (decode) rounding of
  // attention, which differs from its multi-token rounding: results then depend on whether a
  // batch holds one token or more (no batch invariance). Off: every batch rounds as
  // llama.cpp's prompt processing does, whatever its size.
  bool llama_cpp_decode_rounding = false;
  // Repack quantized weights at load into the kernel level's interleaved layout where it has
  // kernels for it (AVX2 and AVX-512: Q4_0, Q4_1, Q8_0; kernels/cpu/packed_weights.h), which
  // also fuses Q/K/V, gate/up and the norms and residual adds into the matmuls. Off: matmuls
  // read GGUF's layout with the kernels that reproduce llama.cpp's AVX2 build bit for bit
  // (README, "Correctness against llama.cpp"), at about half the speed.
  bool repack_weights = true;
  // Built-in profiling (ops/op_profile.h): time per op type and step kind is added here; the
  // profile must outlive the model. Null: no timing at all.
  OpProfile* profile = nullptr;
};

}  // namespace tokamak
