// Specific malformed files, each rejected with one line that starts with the file's path and
// says what is wrong.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "format/gguf.h"
#include "gguf_test_util.h"

namespace tokamak::gguf {
namespace {

using test::RawGguf;
constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;

// Parses `bytes` and checks that the Error names the file and contains `what`.
void expect_error(const std::vector<uint8_t>& bytes, const std::string& what) {
  const std::string msg = test::parse_error(bytes);
  EXPECT_EQ(msg.rfind(std::string(test::kTestName) + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected: " << what;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// A file with one key whose value type and value bytes follow.
RawGguf one_kv(ValueType type) {
  RawGguf r;
  r.header(3, 0, 1).kv("k", type);
  return r;
}

// A file with one F32 tensor described by the arguments, and `data` bytes of tensor data.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type,
                                uint64_t offset = 0, size_t data = 64) {
  RawGguf r;
  r.header(3, 1, 0).tensor("t", dims, type, offset).pad(32).zeros(data);
  return r.bytes;
}

TEST(Hostile, BadMagic) {
  expect_error({'G', 'G', 'M', 'L', 3, 0, 0, 0}, "not a GGUF file (starts with \"GGML\"");
  expect_error({0x00, 0xff, 'A'}, "not a GGUF file (starts with \"\\x00");
  RawGguf r;
  r.header(3, 0, 0);
  r.bytes[3] = 'G';
  expect_error(r.bytes, "not a GGUF file");
}

TEST(Hostile, Versions) {
  RawGguf v1;
  v1.header(1, 0, 0);
  expect_error(v1.bytes, "unsupported GGUF version 1 (versions 2 and 3 are supported)");
  RawGguf v99;
  v99.header(99, 0, 0);
  expect_error(v99.bytes, "unsupported GGUF version 99");
  RawGguf v0;
  v0.header(0, 0, 0);
  expect_error(v0.bytes, "unsupported GGUF version 0");
  RawGguf big_endian;
  big_endian.header(0x03000000, 0, 0);
  expect_error(big_endian.bytes, "big-endian GGUF files are not supported");
  RawGguf v2;
  v2.header(2, 0, 0);
  EXPECT_EQ(File::from_bytes("v2.gguf", v2.bytes).version(), 2u);
}

TEST(Hostile, TruncatedHeader) {
  expect_error({'G', 'G', 'U', 'F'}, "truncated: version at offset 4 needs 4 bytes, 0 left");
  expect_error({'G', 'G', 'U', 'F', 3, 0, 0, 0, 0}, "truncated: tensor count");
}

TEST(Hostile, HugeCounts) {
  RawGguf tensors;
  tensors.header(3, uint64_t{1} << 63, 0);
  expect_error(tensors.bytes, "tensor count 9223372036854775808 is more than");
  RawGguf kvs;
  kvs.header(3, 0, uint64_t{1} << 60);
  expect_error(kvs.bytes, "metadata count 1152921504606846976 is more than");
  // A count the header's remaining bytes allow but the metadata leaves no room for.
  RawGguf after;
  after.header(3, 2, 1).kv("k", ValueType::STRING).str(std::string(64, 'x'));
  expect_error(after.bytes, "tensor count 2 is more than the 0 bytes left after the metadata");
}

TEST(Hostile, HugeStringLengths) {
  RawGguf key;
  key.header(3, 0, 1).u64(uint64_t{1} << 62).zeros(16);
  expect_error(key.bytes,
               "metadata entry 0: metadata key at offset 24 has length 4611686018427387904, "
               "more than the 16 bytes left");
  expect_error(one_kv(ValueType::STRING).u64(uint64_t{1} << 62).bytes,
               "metadata 'k': string value at offset 37 has length 4611686018427387904");
  RawGguf name;
  name.header(3, 1, 0).u64(~uint64_t{0}).zeros(40);
  expect_error(name.bytes,
               "tensor info 0: tensor name at offset 24 has length "
               "18446744073709551615");
}

TEST(Hostile, HugeArrays) {
  expect_error(one_kv(ValueType::ARRAY).u32(0).u64(uint64_t{1} << 62).zeros(8).bytes,
               "metadata 'k': array of 4611686018427387904 uint8 items is longer than the rest "
               "of the file (8 bytes)");
  expect_error(one_kv(ValueType::ARRAY).u32(8).u64(~uint64_t{0}).bytes,
               "array of 18446744073709551615 string items");
  // Arrays of arrays: each level is bounded by what is left.
  expect_error(one_kv(ValueType::ARRAY).u32(9).u64(2).u32(0).u64(1000).zeros(20).bytes,
               "array of 1000 uint8 items is longer than the rest of the file");
}

TEST(Hostile, TooManyValuesInAll) {
  // 2^24 uint8 items are only 16 MiB of file but would be 16 M Values in memory.
  auto r = one_kv(ValueType::ARRAY).u32(0).u64(kMaxMetadataValues);
  r.zeros(kMaxMetadataValues);
  expect_error(r.bytes, "metadata holds more than 16777216 values in all");
}

TEST(Hostile, ArraysNestedTooDeep) {
  auto r = one_kv(ValueType::ARRAY);
  for (int level = 0; level < 1000; ++level) r.u32(9).u64(1);
  expect_error(r.bytes, "metadata 'k': arrays nested more than 8 deep");
  // Exactly kMaxArrayDepth levels are fine.
  auto ok = one_kv(ValueType::ARRAY);
  for (int level = 1; level < kMaxArrayDepth; ++level) ok.u32(9).u64(1);
  ok.u32(0).u64(0);
  EXPECT_NO_THROW(File::from_bytes("ok.gguf", ok.bytes));
  auto bad = one_kv(ValueType::ARRAY);
  for (int level = 0; level < kMaxArrayDepth; ++level) bad.u32(9).u64(1);
  bad.u32(0).u64(0);
  expect_error(bad.bytes, "nested more than 8 deep");
}

TEST(Hostile, UnknownValueTypes) {
  expect_error(one_kv(static_cast<ValueType>(13)).zeros(8).bytes,
               "metadata 'k': unknown metadata value type 13");
  expect_error(one_kv(static_cast<ValueType>(0xffffffff)).zeros(8).bytes,
               "unknown metadata value type 4294967295");
  expect_error(one_kv(ValueType::ARRAY).u32(99).u64(0).bytes, "unknown array item type 99");
}

TEST(Hostile, BoolOutOfRange) {
  expect_error(one_kv(ValueType::BOOL).u8(2).bytes,
               "metadata 'k': bool value 2 is neither 0 nor 1");
  expect_error(one_kv(ValueType::ARRAY).u32(7).u64(2).u8(1).u8(255).bytes, "bool value 255");
}

TEST(Hostile, TruncatedValue) {
  expect_error(one_kv(ValueType::UINT64).u32(7).bytes,
               "metadata 'k': truncated: uint64 value at offset 37 needs 8 bytes, 4 left");
}

TEST(Hostile, TensorTypes) {
  expect_error(one_tensor({4}, 99), "tensor info 0: tensor 't' has unknown type id 99");
  expect_error(one_tensor({4}, 4), "unknown type id 4");  // Q4_2, removed from GGML
  expect_error(one_tensor({4}, 0xffffffff), "unknown type id 4294967295");
}

TEST(Hostile, TensorDimensions) {
  expect_error(one_tensor({}, kF32), "tensor 't' has 0 dimensions (1 to 4 allowed)");
  expect_error(one_tensor({1, 1, 1, 1, 1}, kF32), "tensor 't' has 5 dimensions");
  RawGguf many;
  many.header(3, 1, 0).str("t").u32(0xffffffff).zeros(64);
  expect_error(many.bytes, "has 4294967295 dimensions");
  expect_error(one_tensor({4, 0}, kF32), "tensor 't' has dimension 1 of size 0");
  expect_error(one_tensor({0}, kF32), "dimension 0 of size 0");
  expect_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, kF32),
               "tensor 't' has too many elements");
  expect_error(one_tensor({~uint64_t{0}}, kF32), "too many elements");
  expect_error(one_tensor({uint64_t{1} << 62, 2}, kF32), "too many elements");
  // Fits int64 as elements but not as bytes.
  expect_error(one_tensor({uint64_t{1} << 62}, kF32), "tensor 't' is too large");
  expect_error(one_tensor({48, 2}, kQ4_0),
               "tensor 't': row of 48 elements is not a multiple of the Q4_0 block size 32");
}

TEST(Hostile, TensorOffsets) {
  expect_error(one_tensor({4}, kF32, 16),
               "tensor 't' offset 16 is not a multiple of the alignment 32");
  expect_error(one_tensor({4}, kF32, 0, 15),
               "tensor 't' data (offset 0, 16 bytes) extends past the end of the file (15 bytes "
               "of tensor data)");
  expect_error(one_tensor({4}, kF32, 32, 40), "extends past the end of the file");
  expect_error(one_tensor({4}, kF32, uint64_t{1} << 63), "extends past the end of the file");
  expect_error(one_tensor({4}, kF32, ~uint64_t{0} - 31), "extends past the end of the file");
  RawGguf no_data;
  no_data.header(3, 1, 0).tensor("t", {4}, kF32, 0);
  expect_error(no_data.bytes,
               "truncated: tensor data section would start at offset 64, past "
               "the end of the file (57 bytes)");
}

TEST(Hostile, OverlappingTensors) {
  RawGguf r;
  r.header(3, 3, 0)
      .tensor("a", {8}, kF32, 0)    // bytes 0..32
      .tensor("b", {8}, kF32, 64)   // bytes 64..96
      .tensor("c", {16}, kF32, 32)  // bytes 32..96, over b's
      .pad(32)
      .zeros(128);
  expect_error(r.bytes, "tensor 'b' data (offset 64) overlaps tensor 'c' (offset 32, 64 bytes)");
  RawGguf same;
  same.header(3, 2, 0).tensor("a", {4}, kF32, 0).tensor("b", {4}, kF32, 0).pad(32).zeros(64);
  expect_error(same.bytes, "overlaps tensor");
}

TEST(Hostile, GapsAndAnyOrderAreAccepted) {
  // Unlike llama.cpp, which wants each offset to be the padded end of the previous tensor.
  RawGguf r;
  r.header(3, 2, 0).tensor("late", {4}, kF32, 128).tensor("early", {4}, kF32, 0).pad(32).zeros(160);
  const File f = File::from_bytes("gaps.gguf", r.bytes);
  EXPECT_EQ(f.tensors()[0].offset, 128u);
  EXPECT_EQ(f.tensors()[0].data, f.tensors()[1].data + 128);
}

TEST(Hostile, Duplicates) {
  RawGguf keys;
  keys.header(3, 0, 2).kv("a\nb", ValueType::UINT8).u8(1).kv("a\nb", ValueType::STRING).str("x");
  expect_error(keys.bytes, "metadata 'a\\nb': duplicate key");
  RawGguf names;
  names.header(3, 2, 0).tensor("w", {4}, kF32, 0).tensor("w", {4}, kF32, 32).pad(32).zeros(64);
  expect_error(names.bytes, "duplicate tensor name 'w'");
}

TEST(Hostile, Alignment) {
  for (uint32_t bad : {0u, 3u, 48u, 0xffffffffu}) {
    RawGguf r;
    r.header(3, 0, 1).kv("general.alignment", ValueType::UINT32).u32(bad);
    expect_error(r.bytes, "general.alignment " + std::to_string(bad) + " is not a power of two");
  }
  RawGguf u64;
  u64.header(3, 0, 1).kv("general.alignment", ValueType::UINT64).u64(64);
  expect_error(u64.bytes, "general.alignment has type uint64, expected uint32");
  RawGguf str;
  str.header(3, 0, 1).kv("general.alignment", ValueType::STRING).str("64");
  expect_error(str.bytes, "general.alignment has type string, expected uint32");
  // A huge power of two is valid; it pushes the data section past the end.
  RawGguf huge;
  huge.header(3, 1, 1).kv("general.alignment", ValueType::UINT32).u32(uint32_t{1} << 31);
  huge.tensor("t", {4}, kF32, 0).zeros(64);
  expect_error(huge.bytes, "tensor data section would start at offset 2147483648");
}

TEST(Hostile, NamesInMessagesAreShortAndPrintable) {
  RawGguf r;
  const std::string name = std::string(500, 'n') + "\x01";
  r.header(3, 1, 0).tensor(name, {4}, 99, 0);
  const std::string msg = test::parse_error(r.bytes);
  EXPECT_LT(msg.size(), 200u) << msg;
  EXPECT_NE(msg.find("nnn...'"), std::string::npos) << msg;
}

// ---- files on disk -------------------------------------------------------------------------

std::string open_error(const std::string& path) {
  try {
    File::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error for " << path;
  return "";
}

TEST(HostileFiles, EmptyFile) {
  test::TempDir dir;
  const std::string path = dir.write("empty.gguf", {});
  EXPECT_EQ(open_error(path), path + ": file is empty (not a GGUF file)");
}

TEST(HostileFiles, Directory) {
  test::TempDir dir;
  const std::string msg = open_error(dir.path().string());
  EXPECT_EQ(msg, dir.path().string() + ": not a regular file");
}

TEST(HostileFiles, MissingFile) {
  test::TempDir dir;
  const std::string path = dir.file("missing.gguf");
  const std::string msg = open_error(path);
  EXPECT_EQ(msg.rfind(path + ": cannot open", 0), 0u) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

TEST(HostileFiles, CorruptFileOnDisk) {
  test::TempDir dir;
  auto bytes = test::small_file();
  const File whole = File::from_bytes("whole.gguf", bytes);
  const TensorInfo& last = whole.tensors().back();
  bytes.resize(whole.data_offset() + last.offset + last.nbytes - 1);  // cut its last byte
  const std::string path = dir.write("short.gguf", bytes);
  const std::string msg = open_error(path);
  EXPECT_EQ(msg.rfind(path + ": tensor 'f16' data", 0), 0u) << msg;
}

TEST(HostileFiles, Unreadable) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  test::TempDir dir;
  const std::string path = dir.write("locked.gguf", test::small_file());
  ::chmod(path.c_str(), 0);
  const std::string msg = open_error(path);
  EXPECT_EQ(msg.rfind(path + ": cannot open", 0), 0u) << msg;
}

}  // namespace
}  // namespace tokamak::gguf
