#include "format/gguf.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace tokamak::gguf {
namespace {

// Arrays of arrays are legal GGUF; a hostile file must not recurse us off the stack.
constexpr int kMaxArrayDepth = 8;
// Smallest encodings, used to bound counts by the bytes left before anything is reserved.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                // empty key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

// Reads little-endian values from the mapped bytes, throwing on any read past the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const auto len = read<uint64_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      throw Error(std::string("truncated while reading ") + what + " at offset " +
                  std::to_string(pos_) + " (needs " + std::to_string(n) + " bytes, " +
                  std::to_string(remaining()) + " left)");
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

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

ValueType read_value_type(Cursor& c, const char* what) {
  const auto raw = c.read<uint32_t>(what);
  if (raw > static_cast<uint32_t>(ValueType::FLOAT64)) {
    throw Error("unknown metadata value type " + std::to_string(raw) + " in " + what);
  }
  return static_cast<ValueType>(raw);
}

Value read_value(Cursor& c, ValueType type, int depth) {
  switch (type) {
    case ValueType::UINT8: return Value::u8(c.read<uint8_t>("uint8 value"));
    case ValueType::INT8: return Value::i8(c.read<int8_t>("int8 value"));
    case ValueType::UINT16: return Value::u16(c.read<uint16_t>("uint16 value"));
    case ValueType::INT16: return Value::i16(c.read<int16_t>("int16 value"));
    case ValueType::UINT32: return Value::u32(c.read<uint32_t>("uint32 value"));
    case ValueType::INT32: return Value::i32(c.read<int32_t>("int32 value"));
    case ValueType::UINT64: return Value::u64(c.read<uint64_t>("uint64 value"));
    case ValueType::INT64: return Value::i64(c.read<int64_t>("int64 value"));
    case ValueType::FLOAT32: return Value::f32(c.read<float>("float32 value"));
    case ValueType::FLOAT64: return Value::f64(c.read<double>("float64 value"));
    case ValueType::BOOL: {
      const auto b = c.read<uint8_t>("bool value");
      if (b > 1) throw Error("bool value " + std::to_string(b) + " is neither 0 nor 1");
      return Value::boolean(b == 1);
    }
    case ValueType::STRING: return Value::string(c.read_string("string value"));
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayDepth) throw Error("metadata arrays nested too deeply");
      const ValueType elem = read_value_type(c, "array element type");
      const auto count = c.read<uint64_t>("array length");
      // Each element takes at least min_encoded_size bytes: bound count before reserving.
      if (count > c.remaining() / min_encoded_size(elem)) {
        throw Error("array of " + std::to_string(count) + " " + value_type_name(elem) +
                    " items is longer than the rest of the file");
      }
      Value::Array items;
      items.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(c, elem, depth + 1));
      return Value::array(elem, std::move(items));
    }
  }
  throw Error("unknown metadata value type");
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

File File::open(const std::string& path) {
  File f;
  f.map_ = std::make_shared<MappedFile>(path);
  try {
    const auto& map = *f.map_;
    Cursor c(map.data(), map.size());
    const auto magic = c.read<uint32_t>("magic");
    if (magic != kMagic) throw Error("not a GGUF file (bad magic)");
    f.version_ = c.read<uint32_t>("version");
    if (f.version_ == 1) throw Error("GGUF version 1 is not supported (only 2 and 3)");
    if (f.version_ != 2 && f.version_ != 3) {
      throw Error("unsupported GGUF version " + std::to_string(f.version_));
    }
    const auto n_tensors = c.read<uint64_t>("tensor count");
    const auto n_kv = c.read<uint64_t>("metadata count");
    if (n_kv > c.remaining() / kMinKvBytes) {
      throw Error("metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
    }
    if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
      throw Error("tensor count " + std::to_string(n_tensors) +
                  " exceeds what the file can hold");
    }

    f.metadata_.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string key = c.read_string("metadata key");
      const ValueType type = read_value_type(c, "metadata value type");
      Value value;
      try {
        value = read_value(c, type, 0);
      } catch (const Error& e) {
        throw Error("metadata '" + key + "': " + e.what());
      }
      if (f.metadata_index_.count(key)) throw Error("duplicate metadata key '" + key + "'");
      f.metadata_index_.emplace(key, f.metadata_.size());
      f.metadata_.emplace_back(std::move(key), std::move(value));
    }

    if (const Value* a = f.find("general.alignment")) {
      if (a->type() != ValueType::UINT32) throw Error("general.alignment is not a uint32");
      const uint64_t align = a->as_u64();
      if (align == 0 || (align & (align - 1)) != 0 || align > (1u << 20)) {
        throw Error("general.alignment " + std::to_string(align) + " is not a power of two");
      }
      f.alignment_ = static_cast<uint32_t>(align);
    }

    f.tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
      TensorInfo t;
      t.name = c.read_string("tensor name");
      const auto n_dims = c.read<uint32_t>("tensor dimension count");
      if (n_dims == 0 || n_dims > kMaxDims) {
        throw Error("tensor '" + t.name + "' has " + std::to_string(n_dims) +
                    " dimensions (1 to 4 allowed)");
      }
      uint64_t n_elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const auto ne = c.read<uint64_t>("tensor dimension");
        if (ne == 0 || ne > (uint64_t{1} << 40) || mul_overflows(n_elements, ne, n_elements) ||
            n_elements > (uint64_t{1} << 50)) {
          throw Error("tensor '" + t.name + "' has an invalid dimension " + std::to_string(ne));
        }
        t.shape.push_back(static_cast<int64_t>(ne));
      }
      const auto type_id = c.read<uint32_t>("tensor type");
      const auto info = dtype_info(type_id);
      if (!info) {
        throw Error("tensor '" + t.name + "' has unknown type id " + std::to_string(type_id));
      }
      t.dtype = info->dtype;
      if (t.shape[0] % info->block_size != 0) {
        throw Error("tensor '" + t.name + "': row of " + std::to_string(t.shape[0]) +
                    " elements is not a multiple of the " + std::string(info->name) +
                    " block size " + std::to_string(info->block_size));
      }
      t.nbytes = n_elements / info->block_size * info->type_size;  // bounded above: no overflow
      t.offset = c.read<uint64_t>("tensor offset");
      if (t.offset % f.alignment_ != 0) {
        throw Error("tensor '" + t.name + "' offset " + std::to_string(t.offset) +
                    " is not aligned to " + std::to_string(f.alignment_));
      }
      if (f.tensor_index_.count(t.name)) throw Error("duplicate tensor name '" + t.name + "'");
      f.tensor_index_.emplace(t.name, f.tensors_.size());
      f.tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment.
    const uint64_t header_end = c.pos();
    const uint64_t data_start = (header_end + f.alignment_ - 1) / f.alignment_ * f.alignment_;
    if (!f.tensors_.empty() && data_start > map.size()) {
      throw Error("truncated: tensor data section starts past the end of the file");
    }
    for (auto& t : f.tensors_) {
      const uint64_t avail = map.size() > data_start ? map.size() - data_start : 0;
      if (t.offset > avail || t.nbytes > avail - t.offset) {
        throw Error("tensor '" + t.name + "' data (offset " + std::to_string(t.offset) + ", " +
                    std::to_string(t.nbytes) + " bytes) extends past the end of the file");
      }
      t.data = map.data() + data_start + t.offset;
    }
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  return f;
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
    throw Error(f.path() + ": metadata '" + std::string(key) + "': " + e.what());
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
  if (!v->is_array()) throw Error(path() + ": metadata '" + std::string(key) + "' is not an array");
  return &v->as_array();
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tokamak::gguf
