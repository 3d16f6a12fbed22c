#pragma once
// GGUF reader. The file is memory-mapped and validated completely when opened: every count,
// length, offset, dimension and element count is checked against the file size and against
// overflow before it is used, so that a truncated, corrupt or hostile file is rejected with
// one Error line naming the file and the problem. Nothing is allocated from an unchecked
// size: every count is bounded by the bytes left in the file before anything is reserved, and
// the metadata as a whole is capped at kMaxMetadataValues values. After open() succeeds the
// tensor data pointers are safe to read.
//
// File layout (little-endian; versions 2 and 3 share it, version 1 used 32-bit counts):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv      x { string key | u32 value type | value }
//   n_tensors x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml type | u64 offset }
//   padding to general.alignment (default 32) | tensor data (offsets relative to here)
// where string = u64 length + bytes, and an array value = u32 item type + u64 count + items.
//
// What the reader accepts beyond llama.cpp and what it refuses:
//   - nested arrays (GGUF allows them, llama.cpp refuses them), up to kMaxArrayDepth levels;
//   - tensor data in any order and with gaps between tensors (llama.cpp requires each
//     offset to be exactly the padded end of the previous tensor); but two tensors whose
//     bytes overlap are an error, as are dimensions of 0 (llama.cpp allows empty tensors).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_value.h"

namespace tokamak {
class MappedFile;
}

namespace tokamak::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;
// Levels of arrays within one metadata value (an array of arrays of strings has 2).
inline constexpr int kMaxArrayDepth = 8;
// All metadata values together, array items included. The largest real vocabularies (about
// 260 K tokens with scores, types and merges) need under 2 M; the cap bounds the memory a
// hostile file can make the reader use to about 1 GiB whatever its size.
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // GGML order: shape[0] is the innermost (contiguous) dimension
  DType dtype = DType::F32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the file's bytes; valid while the File lives

  int64_t n_elements() const;
};

class File {
 public:
  // Opens, maps and validates `path`; throws Error("<path>: <what is wrong>").
  static File open(const std::string& path);
  // Validates a copy of `bytes` as if it were a file called `name` (tests, fuzzing, files
  // received over the network). The copy is page-aligned like a mapping.
  static File from_bytes(const std::string& name, std::span<const uint8_t> bytes);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }
  // Start of the tensor data section (a multiple of alignment(); past the end of a file with
  // no tensors and no final padding). Tensor data pointers are aligned to
  // min(alignment(), 4096) bytes.
  uint64_t data_offset() const { return data_offset_; }

  // Metadata, in file order for listing and by key for lookup.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed lookups: nullopt when the key is absent; Error naming the file and key when it is
  // present with the wrong type (get_int: any integer type whose value fits an int64;
  // get_float: floats and integers; get_bool: bool only).
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const Value::Array* get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // The bytes [p, p + n) of tensor data are no longer needed (a copy replaced them): for a
  // mapped file their whole pages leave the resident set and stay readable (see
  // MappedFile::drop_pages); for a file held in memory, nothing happens.
  void drop_pages(const void* p, size_t n) const;
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  File() = default;
  // Validates data[0, size) (owned by `storage`) and fills everything else.
  void parse();

  std::string path_;
  std::shared_ptr<const void> storage_;  // the mapping or the copied bytes
  const MappedFile* map_ = nullptr;      // storage_ when it is a mapping
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace tokamak::gguf
