#pragma once
// Helpers shared by the GGUF tests: raw byte building for files the Writer refuses to make,
// a temporary directory, error capture, and a small valid file that exercises every section.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"

namespace tokamak::gguf::test {

// Appends little-endian GGUF pieces with no checking at all.
class RawGguf {
 public:
  template <typename T>
  RawGguf& put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  // magic, version, tensor count, metadata count
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes.insert(bytes.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  // key and value type; the value follows with put()/str()/...
  RawGguf& kv(std::string_view key, ValueType type) {
    return str(key).u32(static_cast<uint32_t>(type));
  }
  RawGguf& tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }

  std::vector<uint8_t> bytes;
};

inline constexpr const char* kTestName = "test.gguf";

// The Error message from `fn`, or "" (and a failure) if it does not throw.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

// The Error message from parsing `bytes` as kTestName, or "" (and a test failure) if it
// parses.
inline std::string parse_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { File::from_bytes(kTestName, bytes); });
}

// A fresh directory under the system's temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("tokamak_format_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const std::string p = file(name);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// A small valid file with every section: metadata of several kinds (a nested array, strings,
// a bool, a float, the tokenizer keys the summary reads) and tensors of three types.
inline Writer small_writer() {
  Writer w(3, 32);
  w.set("general.architecture", Value::string("llama"));
  w.set("general.name", Value::string("tiny"));
  w.set("llama.context_length", Value::u32(64));
  w.set("llama.embedding_length", Value::u32(32));
  w.set("llama.attention.head_count", Value::u32(4));
  w.set("llama.attention.layer_norm_rms_epsilon", Value::f32(1e-5f));
  w.set("tokenizer.ggml.tokens",
        Value::array(ValueType::STRING,
                     {Value::string("<unk>"), Value::string("a"), Value::string("bc")}));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  w.set("nested", Value::array(ValueType::ARRAY,
                               {Value::array(ValueType::INT16, {Value::i16(-2), Value::i16(7)}),
                                Value::array(ValueType::STRING, {})}));
  w.add_tensor("f32", {3, 2}, DType::F32, pattern_bytes(24, 1));
  w.add_tensor("q8", {32}, DType::Q8_0, pattern_bytes(34, 2));
  w.add_tensor("f16", {5}, DType::F16, pattern_bytes(10, 3));
  return w;
}

inline std::vector<uint8_t> small_file() { return small_writer().to_bytes(); }

inline std::string shared_file(const std::string& rel) {
  return std::string(TOKAMAK_SHARED_DIR) + "/" + rel;
}

}  // namespace tokamak::gguf::test
