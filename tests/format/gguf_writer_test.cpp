// gguf::Writer refuses what the reader would refuse, and writes files atomically.

#include "format/gguf_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "format/gguf.h"
#include "gguf_test_util.h"

namespace tokamak::gguf {
namespace {

using test::error_of;
using test::pattern_bytes;

TEST(Writer, RejectsBadVersionAndAlignment) {
  EXPECT_THROW(Writer(1), Error);
  EXPECT_THROW(Writer(4), Error);
  EXPECT_THROW(Writer(3, 0), Error);
  EXPECT_THROW(Writer(3, 48), Error);
  Writer w;
  EXPECT_THROW(w.set("general.alignment", Value::u32(24)), Error);
  EXPECT_THROW(w.set("general.alignment", Value::u64(64)), Error);
  EXPECT_EQ(w.alignment(), 32u);
}

TEST(Writer, RejectsMalformedArrays) {
  Writer w;
  const std::string msg = error_of([&] {
    w.set("mixed", Value::array(ValueType::UINT8, {Value::u8(1), Value::u16(2)}));
  });
  EXPECT_NE(msg.find("'mixed'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("uint16"), std::string::npos) << msg;
  // An inner array whose items disagree with its own item type.
  EXPECT_THROW(w.set("inner", Value::array(ValueType::ARRAY,
                                           {Value::array(ValueType::STRING, {Value::u8(1)})})),
               Error);
  Value deep = Value::array(ValueType::UINT8, {});
  for (int level = 1; level <= kMaxArrayDepth; ++level) {
    deep = Value::array(ValueType::ARRAY, {deep});
  }
  EXPECT_NE(error_of([&] { w.set("deep", deep); }).find("nested"), std::string::npos);
}

TEST(Writer, RejectsBadTensors) {
  Writer w;
  EXPECT_THROW(w.add_tensor("none", {}, DType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("five", {1, 1, 1, 1, 1}, DType::F32, pattern_bytes(4, 0)), Error);
  EXPECT_THROW(w.add_tensor("zero", {4, 0}, DType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("negative", {-4}, DType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("block", {16}, DType::Q4_0, pattern_bytes(9, 0)), Error);
  EXPECT_THROW(w.add_tensor("size", {4}, DType::F32, pattern_bytes(15, 0)), Error);
  EXPECT_THROW(w.add_tensor("huge", {int64_t{1} << 40, int64_t{1} << 40}, DType::F32, {}), Error);
  w.add_tensor("ok", {4}, DType::F32, pattern_bytes(16, 0));
  EXPECT_THROW(w.add_tensor("ok", {4}, DType::F32, pattern_bytes(16, 0)), Error);
}

TEST(Writer, WriteMatchesToBytesAndLeavesNoPart) {
  const Writer w = test::small_writer();
  test::TempDir dir;
  const std::string path = dir.file("out.gguf");
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
  EXPECT_EQ(written, w.to_bytes());
  EXPECT_FALSE(std::filesystem::exists(path + ".part"));
  // Writing again replaces the file.
  w.write(path);
  EXPECT_EQ(std::filesystem::file_size(path), written.size());
}

TEST(Writer, WriteFailureNamesThePath) {
  test::TempDir dir;
  const std::string path = dir.file("no/such/dir/out.gguf");
  const std::string msg = error_of([&] { test::small_writer().write(path); });
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
}

TEST(Writer, TensorDataFollowsInOrderPaddedToAlignment) {
  // The layout llama.cpp requires: each offset is the padded end of the previous tensor.
  for (uint32_t alignment : {1u, 8u, 32u, 64u}) {
    Writer w(3, alignment);
    w.add_tensor("a", {3}, DType::F32, pattern_bytes(12, 0));
    w.add_tensor("b", {5}, DType::F16, pattern_bytes(10, 0));
    w.add_tensor("c", {32}, DType::Q4_1, pattern_bytes(20, 0));
    const File f = File::from_bytes("t.gguf", w.to_bytes());
    uint64_t expected = 0;
    for (const auto& t : f.tensors()) {
      EXPECT_EQ(t.offset, expected) << t.name << " alignment " << alignment;
      expected += (t.nbytes + alignment - 1) / alignment * alignment;
    }
    EXPECT_EQ(f.file_size(), f.data_offset() + expected);
  }
}

}  // namespace
}  // namespace tokamak::gguf
