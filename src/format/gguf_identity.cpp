#include "format/gguf_identity.h"

#include <algorithm>
#include <string_view>

#include "core/sha256.h"
#include "format/gguf.h"

namespace tokamak::gguf {
namespace {

constexpr uint64_t kEdgeBytes = uint64_t{1} << 20;  // of the data section, at each end
constexpr uint64_t kTensorBytes = 4096;             // of each tensor

void put_u64(Sha256& sha, uint64_t v) {
  sha.update(&v, sizeof(v));
}

void put_string(Sha256& sha, std::string_view s) {
  put_u64(sha, s.size());
  sha.update(s.data(), s.size());
}

void put_value(Sha256& sha, const Value& v) {
  put_u64(sha, static_cast<uint64_t>(v.type()));
  if (v.is_array()) {
    put_u64(sha, static_cast<uint64_t>(v.elem_type()));
    put_u64(sha, v.as_array().size());
    for (const Value& item : v.as_array()) put_value(sha, item);
  } else if (v.is_string()) {
    put_string(sha, v.as_string());
  } else if (v.is_bool()) {
    put_u64(sha, v.as_bool() ? 1 : 0);
  } else if (v.is_float()) {
    const double d = v.as_f64();
    sha.update(&d, sizeof(d));
  } else if (v.type() == ValueType::UINT64) {
    put_u64(sha, v.as_u64());
  } else {
    put_u64(sha, static_cast<uint64_t>(v.as_i64()));
  }
}

}  // namespace

std::array<uint8_t, 32> content_identity(const File& file) {
  Sha256 sha;
  put_string(sha, "tokamak gguf identity v1");
  put_u64(sha, file.version());
  put_u64(sha, file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    put_string(sha, key);
    put_value(sha, value);
  }
  const auto& tensors = file.tensors();
  put_u64(sha, tensors.size());
  // The data section: from the lowest tensor start to the highest tensor end.
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  for (const TensorInfo& t : tensors) {
    put_string(sha, t.name);
    put_u64(sha, t.shape.size());
    for (int64_t d : t.shape) put_u64(sha, static_cast<uint64_t>(d));
    put_u64(sha, static_cast<uint64_t>(t.dtype));
    put_u64(sha, t.offset);
    put_u64(sha, t.nbytes);
    sha.update(t.data, std::min(t.nbytes, kTensorBytes));
    if (t.nbytes == 0) continue;
    if (begin == nullptr || t.data < begin) begin = t.data;
    if (end == nullptr || t.data + t.nbytes > end) end = t.data + t.nbytes;
  }
  if (begin != nullptr) {
    const uint64_t size = static_cast<uint64_t>(end - begin);
    const uint64_t head = std::min(size, kEdgeBytes);
    sha.update(begin, head);
    const uint64_t tail = std::min(size - head, kEdgeBytes);
    sha.update(end - tail, tail);
  }
  return sha.finish();
}

}  // namespace tokamak::gguf
