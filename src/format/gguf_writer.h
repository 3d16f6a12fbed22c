#pragma once
// GGUF writer: builds a file in memory from metadata and tensors given as encoded bytes (the
// quantizers in kernels/cpu produce those). Used by tests to make tiny models, by tools that
// make random-weight models of real shapes, and later by `tokamak quantize`.

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_value.h"

namespace tokamak::gguf {

class Writer {
 public:
  // version 2 or 3; alignment a power of two (written as general.alignment when not 32).
  explicit Writer(uint32_t version = 3, uint32_t alignment = 32);

  // Sets a metadata key (a later set of the same key replaces the value in place).
  void set(const std::string& key, Value value);

  // Adds a tensor; shape in GGML order (shape[0] innermost). `data` must hold exactly
  // row_bytes(dtype, shape[0]) * (product of the other dims) bytes. Throws Error otherwise.
  void add_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                  std::vector<uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // throws Error naming the path on failure

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    std::vector<uint8_t> data;
  };

  uint32_t version_;
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tokamak::gguf
