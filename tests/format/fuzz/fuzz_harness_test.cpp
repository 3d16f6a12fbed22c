// Runs the libFuzzer entry point over the seed files, so that the harness keeps building and
// working when the fuzzer is not being run.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "../gguf_test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tokamak::gguf {
namespace {

TEST(FuzzHarness, RunsOnSeeds) {
  const auto small = test::small_file();
  EXPECT_EQ(LLVMFuzzerTestOneInput(small.data(), small.size()), 0);
  EXPECT_EQ(LLVMFuzzerTestOneInput(small.data(), small.size() / 2), 0);
  EXPECT_EQ(LLVMFuzzerTestOneInput(nullptr, 0), 0);
  std::ifstream in(test::shared_file("testdata/stories260K.gguf"), std::ios::binary);
  const std::vector<uint8_t> stories((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
  ASSERT_FALSE(stories.empty());
  EXPECT_EQ(LLVMFuzzerTestOneInput(stories.data(), stories.size()), 0);
}

// With TOKAMAK_FUZZ_CORPUS=DIR set, writes small seed files there for the fuzzer (see
// README.md); otherwise skipped.
TEST(FuzzHarness, WriteSeedCorpus) {
  const char* dir = std::getenv("TOKAMAK_FUZZ_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "TOKAMAK_FUZZ_CORPUS not set";
  test::small_writer().write(std::string(dir) + "/small.gguf");
  Writer v2(2, 8);
  v2.set("general.architecture", Value::string("llama"));
  v2.set("llama.block_count", Value::u32(1));
  v2.add_tensor("w", {32, 2}, DType::Q4_0, test::pattern_bytes(36, 9));
  v2.write(std::string(dir) + "/v2_align8.gguf");
  Writer empty;
  empty.write(std::string(dir) + "/empty.gguf");
}

}  // namespace
}  // namespace tokamak::gguf
