#pragma once
// GGUF writer: builds a file from metadata and tensors given as encoded bytes (the quantizers
// in kernels/cpu produce those). Used by tests to make tiny models, by tools that make
// random-weight models of real shapes, and later by `tokamak quantize`. It only writes files
// that gguf::File accepts: values, shapes and sizes are checked when they are added.

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_value.h"

namespace tokamak::gguf {

class Writer {
 public:
  // version 2 or 3 (the same layout); alignment a power of two, written as
  // general.alignment when it is not the default 32.
  explicit Writer(uint32_t version = 3, uint32_t alignment = 32);

  // Sets a metadata key (a later set of the same key replaces the value in place). Throws
  // Error for an array whose items do not all have its item type, arrays nested deeper than
  // kMaxArrayDepth, or a general.alignment that is not a uint32 power of two (setting a valid
  // one changes the alignment the file is written with).
  void set(const std::string& key, Value value);

  // Adds a tensor; shape in GGML order (shape[0] innermost), 1 to 4 dimensions, none 0.
  // `data` must hold exactly row_bytes(dtype, shape[0]) * (product of the other dims) bytes.
  // Throws Error otherwise, or for a duplicate name.
  void add_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                  std::vector<uint8_t> data);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }

  std::vector<uint8_t> to_bytes() const;
  // Writes the file through a temporary next to it ("<path>.part"), renamed over `path` once
  // complete, so a failed write leaves no partial model behind. Throws Error naming the path.
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    std::vector<uint8_t> data;
  };

  // Everything before the tensor data: header, metadata, tensor infos, padding.
  std::vector<uint8_t> header_bytes() const;
  size_t padding_after(size_t n) const { return (alignment_ - n % alignment_) % alignment_; }

  uint32_t version_;
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tokamak::gguf
