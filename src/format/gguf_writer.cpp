#include "format/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "format/gguf.h"

namespace tokamak::gguf {
namespace {

class Bytes {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void pad_to(size_t alignment) {
    while (out.size() % alignment != 0) out.push_back(0);
  }
  std::vector<uint8_t> out;
};

void put_value(Bytes& b, const Value& v) {
  switch (v.type()) {
    case ValueType::UINT8: b.put<uint8_t>(static_cast<uint8_t>(v.as_u64())); break;
    case ValueType::INT8: b.put<int8_t>(static_cast<int8_t>(v.as_i64())); break;
    case ValueType::UINT16: b.put<uint16_t>(static_cast<uint16_t>(v.as_u64())); break;
    case ValueType::INT16: b.put<int16_t>(static_cast<int16_t>(v.as_i64())); break;
    case ValueType::UINT32: b.put<uint32_t>(static_cast<uint32_t>(v.as_u64())); break;
    case ValueType::INT32: b.put<int32_t>(static_cast<int32_t>(v.as_i64())); break;
    case ValueType::UINT64: b.put<uint64_t>(v.as_u64()); break;
    case ValueType::INT64: b.put<int64_t>(v.as_i64()); break;
    case ValueType::FLOAT32: b.put<float>(static_cast<float>(v.as_f64())); break;
    case ValueType::FLOAT64: b.put<double>(v.as_f64()); break;
    case ValueType::BOOL: b.put<uint8_t>(v.as_bool() ? 1 : 0); break;
    case ValueType::STRING: b.put_string(v.as_string()); break;
    case ValueType::ARRAY: {
      const auto& items = v.as_array();
      b.put<uint32_t>(static_cast<uint32_t>(v.elem_type()));
      b.put<uint64_t>(items.size());
      for (const auto& item : items) {
        if (item.type() != v.elem_type()) {
          throw Error(std::string("array item of type ") + value_type_name(item.type()) +
                      " in an array of " + value_type_name(v.elem_type()));
        }
        put_value(b, item);
      }
      break;
    }
  }
}

}  // namespace

Writer::Writer(uint32_t version, uint32_t alignment) : version_(version), alignment_(alignment) {
  if (version != 2 && version != 3) throw Error("GGUF writer: version must be 2 or 3");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw Error("GGUF writer: alignment must be a power of two");
  }
  if (alignment != kDefaultAlignment) set("general.alignment", Value::u32(alignment));
}

void Writer::set(const std::string& key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                        std::vector<uint8_t> data) {
  if (shape.empty() || shape.size() > kMaxDims) {
    throw Error("GGUF writer: tensor '" + name + "' needs 1 to 4 dimensions");
  }
  const auto& info = dtype_info(dtype);
  if (shape[0] <= 0 || shape[0] % info.block_size != 0) {
    throw Error("GGUF writer: tensor '" + name + "' row length is not a multiple of the " +
                std::string(info.name) + " block size");
  }
  size_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] <= 0) throw Error("GGUF writer: tensor '" + name + "' has an empty dimension");
    rows *= static_cast<size_t>(shape[i]);
  }
  const size_t expected = row_bytes(dtype, shape[0]) * rows;
  if (data.size() != expected) {
    throw Error("GGUF writer: tensor '" + name + "' has " + std::to_string(data.size()) +
                " bytes, expected " + std::to_string(expected));
  }
  for (const auto& t : tensors_) {
    if (t.name == name) throw Error("GGUF writer: duplicate tensor '" + name + "'");
  }
  tensors_.push_back({name, std::move(shape), dtype, std::move(data)});
}

std::vector<uint8_t> Writer::to_bytes() const {
  Bytes b;
  b.put<uint32_t>(kMagic);
  b.put<uint32_t>(version_);
  b.put<uint64_t>(tensors_.size());
  b.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    b.put_string(key);
    b.put<uint32_t>(static_cast<uint32_t>(value.type()));
    put_value(b, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    b.put_string(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) b.put<uint64_t>(static_cast<uint64_t>(d));
    b.put<uint32_t>(static_cast<uint32_t>(t.dtype));
    b.put<uint64_t>(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  b.pad_to(alignment_);
  for (const auto& t : tensors_) {
    b.out.insert(b.out.end(), t.data.begin(), t.data.end());
    b.pad_to(alignment_);
  }
  return std::move(b.out);
}

void Writer::write(const std::string& path) const {
  const auto bytes = to_bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(path + ": write failed");
}

}  // namespace tokamak::gguf
