#include "format/gguf_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "format/gguf.h"

namespace tokamak::gguf {
namespace {

class Bytes {
 public:
  // Some capacity up front also keeps GCC 12 from warning falsely (-Wstringop-overflow)
  // about the first put into an empty vector.
  Bytes() { out.reserve(4096); }

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
      for (const auto& item : items) put_value(b, item);
      break;
    }
  }
}

// Checks what the reader will check: arrays hold items of their own item type, nested at
// most kMaxArrayDepth levels. `depth` counts the arrays around `v`.
void check_value(const Value& v, int depth) {
  if (!v.is_array()) return;
  if (depth + 1 > kMaxArrayDepth) {
    throw Error("arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
  }
  for (const auto& item : v.as_array()) {
    if (item.type() != v.elem_type()) {
      throw Error(std::string("array item of type ") + value_type_name(item.type()) +
                  " in an array of " + value_type_name(v.elem_type()));
    }
    check_value(item, depth + 1);
  }
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

Writer::Writer(uint32_t version, uint32_t alignment) : version_(version), alignment_(alignment) {
  if (version != 2 && version != 3) throw Error("GGUF writer: version must be 2 or 3");
  if (!is_power_of_two(alignment)) throw Error("GGUF writer: alignment must be a power of two");
  if (alignment != kDefaultAlignment) set("general.alignment", Value::u32(alignment));
}

void Writer::set(const std::string& key, Value value) {
  try {
    check_value(value, 0);
  } catch (const Error& e) {
    throw Error("GGUF writer: metadata '" + key + "': " + e.what());
  }
  if (key == "general.alignment") {
    if (value.type() != ValueType::UINT32 || !is_power_of_two(value.as_u64())) {
      throw Error("GGUF writer: general.alignment must be a uint32 power of two");
    }
    alignment_ = static_cast<uint32_t>(value.as_u64());
  }
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
  const std::string what = "GGUF writer: tensor '" + name + "'";
  if (shape.empty() || shape.size() > kMaxDims) throw Error(what + " needs 1 to 4 dimensions");
  const auto& info = dtype_info(dtype);
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw Error(what + " has a dimension that is not positive");
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw Error(what + " has too many elements");
    }
  }
  if (shape[0] % info.block_size != 0) {
    throw Error(what + " row length " + std::to_string(shape[0]) + " is not a multiple of the " +
                std::string(info.name) + " block size " + std::to_string(info.block_size));
  }
  const uint64_t rows = elements / static_cast<uint64_t>(shape[0]);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(uint64_t{row_bytes(dtype, shape[0])}, rows, &expected)) {
    throw Error(what + " is too large");
  }
  if (data.size() != expected) {
    throw Error(what + " has " + std::to_string(data.size()) + " bytes, expected " +
                std::to_string(expected));
  }
  for (const auto& t : tensors_) {
    if (t.name == name) throw Error("GGUF writer: duplicate tensor '" + name + "'");
  }
  tensors_.push_back({name, std::move(shape), dtype, std::move(data)});
}

std::vector<uint8_t> Writer::header_bytes() const {
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
  // Tensors follow one another in order, each padded to the alignment (what llama.cpp
  // requires of offsets).
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    b.put_string(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) b.put<uint64_t>(static_cast<uint64_t>(d));
    b.put<uint32_t>(static_cast<uint32_t>(t.dtype));
    b.put<uint64_t>(offset);
    offset += t.data.size() + padding_after(t.data.size());
  }
  b.out.resize(b.out.size() + padding_after(b.out.size()), 0);
  return std::move(b.out);
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(out.size() + padding_after(t.data.size()), 0);
  }
  return out;
}

void Writer::write(const std::string& path) const {
  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot open " + part + " for writing");
    auto put = [&out](const void* p, size_t n) {
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    static constexpr char kZeros[4096] = {};
    auto pad = [&put](size_t n) {
      for (size_t k; n > 0; n -= k) {
        k = std::min(n, sizeof kZeros);
        put(kZeros, k);
      }
    };
    const auto header = header_bytes();
    put(header.data(), header.size());
    for (const auto& t : tensors_) {
      put(t.data.data(), t.data.size());
      pad(padding_after(t.data.size()));
    }
    out.close();
    if (!out) {
      std::remove(part.c_str());
      throw Error(path + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) {
    std::remove(part.c_str());
    throw Error(path + ": cannot rename " + part + " into place: " + ec.message());
  }
}

}  // namespace tokamak::gguf
