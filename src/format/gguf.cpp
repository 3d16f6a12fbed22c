#include "format/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tokamak::gguf {
namespace {

// Smallest encodings, used to bound counts by the bytes left before anything is reserved.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset
constexpr size_t kBufferAlignment = 4096;                    // from_bytes copies, like a page

// A name from the file as it appears in a message: quoted, escaped, short.
// (Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.)
std::string quoted(std::string_view s) {
  std::string out = "'";
  out += escape(s, 64);
  out += '\'';
  return out;
}

uint64_t min_encoded_size(ValueType type) {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL: return 1;
    case ValueType::UINT16:
    case ValueType::INT16: return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32: return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 4 + 8;
  }
  return 1;
}

// Reads little-endian values from the file's bytes, throwing on any read past the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    if (sizeof(T) > remaining()) {
      throw Error(std::string("truncated: ") + what + " at offset " + std::to_string(pos_) +
                  " needs " + std::to_string(sizeof(T)) + " bytes, " + std::to_string(remaining()) +
                  " left");
    }
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t at = pos_;
    const auto len = read<uint64_t>(what);
    if (len > remaining()) {
      throw Error(std::string(what) + " at offset " + std::to_string(at) + " has length " +
                  std::to_string(len) + ", more than the " + std::to_string(remaining()) +
                  " bytes left in the file");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Reads metadata values, counting them against kMaxMetadataValues.
class ValueReader {
 public:
  explicit ValueReader(Cursor& c) : c_(c) {}

  ValueType read_type(const char* what) {
    const auto raw = c_.read<uint32_t>(what);
    if (raw > static_cast<uint32_t>(ValueType::FLOAT64)) {
      throw Error("unknown " + std::string(what) + " " + std::to_string(raw));
    }
    return static_cast<ValueType>(raw);
  }

  Value read(ValueType type, int depth) {
    if (values_left_ == 0) too_many();
    --values_left_;
    switch (type) {
      case ValueType::UINT8: return Value::u8(c_.read<uint8_t>("uint8 value"));
      case ValueType::INT8: return Value::i8(c_.read<int8_t>("int8 value"));
      case ValueType::UINT16: return Value::u16(c_.read<uint16_t>("uint16 value"));
      case ValueType::INT16: return Value::i16(c_.read<int16_t>("int16 value"));
      case ValueType::UINT32: return Value::u32(c_.read<uint32_t>("uint32 value"));
      case ValueType::INT32: return Value::i32(c_.read<int32_t>("int32 value"));
      case ValueType::UINT64: return Value::u64(c_.read<uint64_t>("uint64 value"));
      case ValueType::INT64: return Value::i64(c_.read<int64_t>("int64 value"));
      case ValueType::FLOAT32: return Value::f32(c_.read<float>("float32 value"));
      case ValueType::FLOAT64: return Value::f64(c_.read<double>("float64 value"));
      case ValueType::BOOL: {
        const auto b = c_.read<uint8_t>("bool value");
        if (b > 1) throw Error("bool value " + std::to_string(b) + " is neither 0 nor 1");
        return Value::boolean(b == 1);
      }
      case ValueType::STRING: return Value::string(c_.read_string("string value"));
      case ValueType::ARRAY: return read_array(depth + 1);
    }
    throw Error("unknown metadata value type");  // unreachable: read_type checked it
  }

 private:
  // `depth`: levels of arrays including this one.
  Value read_array(int depth) {
    if (depth > kMaxArrayDepth) {
      throw Error("arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
    }
    const ValueType elem = read_type("array item type");
    const auto count = c_.read<uint64_t>("array length");
    // Each item takes at least min_encoded_size bytes: bound count before reserving.
    if (count > c_.remaining() / min_encoded_size(elem)) {
      throw Error("array of " + std::to_string(count) + " " + value_type_name(elem) +
                  " items is longer than the rest of the file (" + std::to_string(c_.remaining()) +
                  " bytes)");
    }
    if (count > values_left_) too_many();
    Value::Array items;
    items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) items.push_back(read(elem, depth));
    return Value::array(elem, std::move(items));
  }

  [[noreturn]] static void too_many() {
    throw Error("metadata holds more than " + std::to_string(kMaxMetadataValues) +
                " values in all");
  }

  Cursor& c_;
  uint64_t values_left_ = kMaxMetadataValues;
};

// Reads one tensor info record and checks it on its own (not yet against the file size).
TensorInfo read_tensor_info(Cursor& c, uint32_t alignment) {
  TensorInfo t;
  t.name = c.read_string("tensor name");
  const std::string name = quoted(t.name);
  const auto n_dims = c.read<uint32_t>("tensor dimension count");
  if (n_dims == 0 || n_dims > kMaxDims) {
    throw Error("tensor " + name + " has " + std::to_string(n_dims) + " dimensions (1 to " +
                std::to_string(kMaxDims) + " allowed)");
  }
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const auto ne = c.read<uint64_t>("tensor dimension");
    if (ne == 0) {
      throw Error("tensor " + name + " has dimension " + std::to_string(d) + " of size 0");
    }
    if (__builtin_mul_overflow(n_elements, ne, &n_elements) ||
        n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error("tensor " + name + " has too many elements (the product of its dimensions " +
                  "overflows 64 bits)");
    }
    t.shape.push_back(static_cast<int64_t>(ne));
  }
  const auto type_id = c.read<uint32_t>("tensor type");
  const auto info = dtype_info(type_id);
  if (!info) {
    throw Error("tensor " + name + " has unknown type id " + std::to_string(type_id));
  }
  t.dtype = info->dtype;
  if (t.shape[0] % info->block_size != 0) {
    throw Error("tensor " + name + ": row of " + std::to_string(t.shape[0]) +
                " elements is not a multiple of the " + std::string(info->name) + " block size " +
                std::to_string(info->block_size));
  }
  if (__builtin_mul_overflow(n_elements / info->block_size, uint64_t{info->type_size}, &t.nbytes)) {
    throw Error("tensor " + name + " is too large (its size overflows 64 bits)");
  }
  t.offset = c.read<uint64_t>("tensor offset");
  if (t.offset % alignment != 0) {
    throw Error("tensor " + name + " offset " + std::to_string(t.offset) +
                " is not a multiple of the alignment " + std::to_string(alignment));
  }
  return t;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

File File::open(const std::string& path) {
  auto map = std::make_shared<const MappedFile>(path);  // throws Error naming the path
  File f;
  f.path_ = path;
  f.data_ = map->data();
  f.size_ = map->size();
  f.map_ = map.get();
  f.storage_ = std::move(map);
  f.parse();
  return f;
}

void File::drop_pages(const void* p, size_t n) const {
  if (map_ != nullptr) map_->drop_pages(p, n);
}

File File::from_bytes(const std::string& name, std::span<const uint8_t> bytes) {
  struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete (p, std::align_val_t{kBufferAlignment}); }
  };
  File f;
  f.path_ = name;
  f.size_ = bytes.size();
  if (!bytes.empty()) {
    std::unique_ptr<uint8_t, AlignedDelete> copy(
        static_cast<uint8_t*>(::operator new (bytes.size(), std::align_val_t{kBufferAlignment})));
    std::memcpy(copy.get(), bytes.data(), bytes.size());
    f.data_ = copy.get();
    f.storage_ = std::shared_ptr<uint8_t>(std::move(copy));
  }
  f.parse();
  return f;
}

void File::parse() {
  try {
    if (size_ == 0) throw Error("file is empty (not a GGUF file)");
    Cursor c(data_, size_);
    if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
      const std::string_view start(reinterpret_cast<const char*>(data_),
                                   std::min<uint64_t>(size_, 4));
      throw Error("not a GGUF file (starts with \"" + escape(start) + "\", expected \"GGUF\")");
    }
    c.read<uint32_t>("magic");
    version_ = c.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3) {
      const uint32_t swapped = __builtin_bswap32(version_);
      if (swapped == 2 || swapped == 3) {
        throw Error("big-endian GGUF files are not supported");
      }
      throw Error("unsupported GGUF version " + std::to_string(version_) +
                  " (versions 2 and 3 are supported)");
    }
    const auto n_tensors = c.read<uint64_t>("tensor count");
    const auto n_kv = c.read<uint64_t>("metadata count");
    if (n_kv > c.remaining() / kMinKvBytes) {
      throw Error("metadata count " + std::to_string(n_kv) + " is more than the " +
                  std::to_string(c.remaining()) + " bytes left in the file can hold");
    }
    if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
      throw Error("tensor count " + std::to_string(n_tensors) + " is more than the " +
                  std::to_string(c.remaining()) + " bytes left in the file can hold");
    }

    ValueReader values(c);
    metadata_.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key;
      try {
        key = c.read_string("metadata key");
      } catch (const Error& e) {
        throw Error("metadata entry " + std::to_string(i) + ": " + e.what());
      }
      try {
        const ValueType type = values.read_type("metadata value type");
        Value value = values.read(type, 0);
        if (metadata_index_.count(key)) throw Error("duplicate key");
        metadata_index_.emplace(key, metadata_.size());
        metadata_.emplace_back(std::move(key), std::move(value));
      } catch (const Error& e) {
        throw Error("metadata " + quoted(key) + ": " + e.what());
      }
    }

    if (const Value* a = find("general.alignment")) {
      if (a->type() != ValueType::UINT32) {
        throw Error(std::string("general.alignment has type ") + value_type_name(a->type()) +
                    ", expected uint32");
      }
      const uint64_t align = a->as_u64();
      if (align == 0 || (align & (align - 1)) != 0) {
        throw Error("general.alignment " + std::to_string(align) + " is not a power of two");
      }
      alignment_ = static_cast<uint32_t>(align);
    }

    // Bound the count again by what the metadata left over.
    if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
      throw Error("tensor count " + std::to_string(n_tensors) + " is more than the " +
                  std::to_string(c.remaining()) + " bytes left after the metadata can hold");
    }
    tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
      TensorInfo t;
      try {
        t = read_tensor_info(c, alignment_);
      } catch (const Error& e) {
        throw Error("tensor info " + std::to_string(i) + ": " + e.what());
      }
      if (tensor_index_.count(t.name)) throw Error("duplicate tensor name " + quoted(t.name));
      tensor_index_.emplace(t.name, tensors_.size());
      tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment (no overflow: the
    // position is at most the file size and the alignment below 2^32).
    data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
    if (tensors_.empty()) return;
    if (data_offset_ > size_) {
      throw Error("truncated: tensor data section would start at offset " +
                  std::to_string(data_offset_) + ", past the end of the file (" +
                  std::to_string(size_) + " bytes)");
    }
    const uint64_t avail = size_ - data_offset_;
    for (auto& t : tensors_) {
      if (t.offset > avail || t.nbytes > avail - t.offset) {
        throw Error("tensor " + quoted(t.name) + " data (offset " + std::to_string(t.offset) +
                    ", " + std::to_string(t.nbytes) + " bytes) extends past the end of the " +
                    "file (" + std::to_string(avail) + " bytes of tensor data)");
      }
      t.data = data_ + data_offset_ + t.offset;
    }
    // Overlapping tensors mean a corrupt file (or one made to alias weights): refuse them.
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(tensors_.size());
    for (const auto& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& prev = *by_offset[i - 1];
      const TensorInfo& next = *by_offset[i];
      if (prev.offset + prev.nbytes > next.offset) {
        throw Error("tensor " + quoted(next.name) + " data (offset " + std::to_string(next.offset) +
                    ") overlaps tensor " + quoted(prev.name) + " (offset " +
                    std::to_string(prev.offset) + ", " + std::to_string(prev.nbytes) + " bytes)");
      }
    }
  } catch (const Error& e) {
    throw Error(path_ + ": " + e.what());
  }
}

const Value* File::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {
template <typename Fn>
auto typed_get(const File& f, std::string_view key, Fn fn) -> std::optional<decltype(fn(Value()))> {
  const Value* v = f.find(key);
  if (!v) return std::nullopt;
  try {
    return fn(*v);
  } catch (const Error& e) {
    throw Error(f.path() + ": metadata " + quoted(key) + ": " + e.what());
  }
}
}  // namespace

std::optional<std::string> File::get_string(std::string_view key) const {
  return typed_get(*this, key, [](const Value& v) { return v.as_string(); });
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  return typed_get(*this, key, [](const Value& v) { return v.as_i64(); });
}

std::optional<double> File::get_float(std::string_view key) const {
  return typed_get(*this, key, [](const Value& v) { return v.as_f64(); });
}

std::optional<bool> File::get_bool(std::string_view key) const {
  return typed_get(*this, key, [](const Value& v) { return v.as_bool(); });
}

const Value::Array* File::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  if (!v->is_array()) {
    throw Error(path() + ": metadata " + quoted(key) + ": expected an array, found " +
                value_type_name(v->type()));
  }
  return &v->as_array();
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tokamak::gguf
