#pragma once
// GGUF reader. The file is memory-mapped and validated completely when opened: every count,
// length, offset, dimension and element count is checked against the file size and against
// overflow before it is used, so that a truncated, corrupt or hostile file is rejected with
// one Error line naming the file and the problem, and nothing is allocated from an
// unchecked size. After open() succeeds the tensor data pointers are safe to read.
//
// File layout (little-endian):
//   magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 value type | value }
//   n_tensors x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset }
//   padding to general.alignment (default 32) | tensor data (offsets relative to here)

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "format/gguf_value.h"

namespace tokamak::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // GGML order: shape[0] is the innermost (contiguous) dimension
  DType dtype = DType::F32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mmap; valid while the File lives

  int64_t n_elements() const;
};

class File {
 public:
  // Opens, maps and validates `path`; throws Error("<path>: <what is wrong>").
  static File open(const std::string& path);

  const std::string& path() const { return map_->path(); }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return map_->size(); }
  uint32_t alignment() const { return alignment_; }

  // Metadata, in file order for listing and by key for lookup.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed lookups: nullopt when the key is absent; Error when present with the wrong type.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // accepts integers too
  std::optional<bool> get_bool(std::string_view key) const;
  const Value::Array* get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  File() = default;

  std::shared_ptr<MappedFile> map_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace tokamak::gguf
