// Hostile input in bulk: every truncation of a small valid file, every single-byte corruption
// of its header, and thousands of seeded random mutations. Each must give a File or an Error,
// never a crash, a hang, undefined behaviour (the sanitizer build checks) or an allocation
// larger than the file could justify (AllocProbe checks, or ASan's allocation limit).

#include <gtest/gtest.h>

#include <random>

#include "alloc_probe.h"
#include "format/gguf.h"
#include "format/gguf_summary.h"
#include "gguf_test_util.h"

namespace tokamak::gguf {
namespace {

// Generous: a Value is about 48 bytes for each byte a uint8 array item takes in the file.
constexpr size_t kAllocPerFileByte = 64;
constexpr size_t kAllocSlack = 4096;

enum class Outcome { kParsed, kRejected };

// Parses `bytes` and, when that succeeds, uses everything the File offers: reads every
// tensor byte through the data pointers and renders the metadata, tensors and summary.
Outcome parse_and_use(const std::vector<uint8_t>& bytes) {
  test::AllocProbe probe;
  Outcome outcome = Outcome::kRejected;
  try {
    const File f = File::from_bytes("m.gguf", bytes);
    outcome = Outcome::kParsed;
    unsigned sum = 0;
    for (const auto& t : f.tensors()) {
      for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      EXPECT_EQ(f.find_tensor(t.name), &t);
    }
    for (const auto& [key, value] : f.metadata()) EXPECT_EQ(f.find(key), &value);
    EXPECT_FALSE(format_metadata(f).empty() && !f.metadata().empty());
    EXPECT_FALSE(format_tensors(f).empty() && !f.tensors().empty());
    try {
      EXPECT_FALSE(describe(f).empty());
    } catch (const Error& e) {
      // A key the summary reads may have been mutated into another type.
      EXPECT_EQ(std::string(e.what()).rfind("m.gguf: metadata '", 0), 0u) << e.what();
    }
    (void)sum;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("m.gguf: ", 0), 0u) << e.what();
  }
  if (test::AllocProbe::available()) {
    EXPECT_LE(probe.largest(), kAllocPerFileByte * bytes.size() + kAllocSlack)
        << "file of " << bytes.size() << " bytes";
  }
  return outcome;
}

// The small file without the padding after its last tensor: every shorter prefix is invalid.
std::vector<uint8_t> minimal_small_file() {
  auto bytes = test::small_file();
  const File f = File::from_bytes("small.gguf", bytes);
  const TensorInfo& last = f.tensors().back();
  bytes.resize(f.data_offset() + last.offset + last.nbytes);
  return bytes;
}

uint64_t header_size(const std::vector<uint8_t>& bytes) {
  return File::from_bytes("small.gguf", bytes).data_offset();
}

TEST(Mutation, EveryTruncationIsAnError) {
  const auto bytes = minimal_small_file();
  ASSERT_EQ(parse_and_use(bytes), Outcome::kParsed);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_EQ(parse_and_use(prefix), Outcome::kRejected) << "prefix of " << n << " bytes";
  }
}

TEST(Mutation, TruncatedFilesOnDisk) {
  // The same through open() and the mapping, for a sample of lengths.
  const auto bytes = minimal_small_file();
  test::TempDir dir;
  for (size_t n = 0; n < bytes.size(); n += 13) {
    const std::string path =
        dir.write("cut.gguf", {bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n)});
    try {
      File::open(path);
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    }
  }
}

TEST(Mutation, PaddingAfterTheLastTensorIsOptional) {
  const auto full = test::small_file();
  const auto minimal = minimal_small_file();
  ASSERT_LT(minimal.size(), full.size());
  for (size_t n = minimal.size(); n <= full.size(); ++n) {
    EXPECT_EQ(parse_and_use({full.begin(), full.begin() + static_cast<ptrdiff_t>(n)}),
              Outcome::kParsed);
  }
}

TEST(Mutation, EverySingleByteCorruptionOfTheHeader) {
  const auto bytes = test::small_file();
  const uint64_t header = header_size(bytes);
  size_t parsed = 0;
  size_t rejected = 0;
  for (size_t pos = 0; pos < header; ++pos) {
    for (const uint8_t v : {0x00, 0xff, 0x80, 0x7f, 0x01, 0x20}) {
      if (bytes[pos] == v) continue;
      auto mutated = bytes;
      mutated[pos] = v;
      (parse_and_use(mutated) == Outcome::kParsed ? parsed : rejected)++;
      if (::testing::Test::HasFailure()) FAIL() << "at byte " << pos << " = " << int{v};
    }
  }
  // Both kinds of outcome occur (a corrupted name or value is still a valid file).
  EXPECT_GT(parsed, 100u);
  EXPECT_GT(rejected, 100u);
}

// Values that make sizes, counts and offsets interesting.
// clang-format off
constexpr uint64_t kInteresting[] = {
    0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 31, 32, 33, 64, 255, 256, 4096, 65535,
    0x7fffffff, 0x80000000, 0xffffffff, uint64_t{1} << 32, uint64_t{1} << 40,
    uint64_t{1} << 60, uint64_t{1} << 62, uint64_t{1} << 63, ~uint64_t{0} - 31, ~uint64_t{0},
};
// clang-format on

std::vector<uint8_t> mutate(std::vector<uint8_t> bytes, uint64_t header, std::mt19937_64& rng) {
  auto below = [&rng](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const int n_mutations = 1 + static_cast<int>(below(4));
  for (int m = 0; m < n_mutations && !bytes.empty(); ++m) {
    const uint64_t hdr = std::min<uint64_t>(header, bytes.size());
    switch (below(6)) {
      case 0:  // a random byte of the header
        bytes[below(hdr)] = static_cast<uint8_t>(rng());
        break;
      case 1:  // a length, count, dimension or offset: an interesting u64 (or u32)
      case 2: {
        const uint64_t v = kInteresting[below(std::size(kInteresting))] + below(3) - 1;
        const size_t width = below(3) == 0 ? 4 : 8;
        const uint64_t pos = below(hdr);
        for (size_t i = 0; i < width && pos + i < bytes.size(); ++i) {
          bytes[pos + i] = static_cast<uint8_t>(v >> (8 * i));
        }
        break;
      }
      case 3:  // a random length
        bytes.resize(below(bytes.size() + 64));
        break;
      case 4: {  // bytes removed from or inserted into the header
        const uint64_t pos = below(hdr);
        const uint64_t n = 1 + below(8);
        if (rng() & 1) {
          bytes.erase(
              bytes.begin() + static_cast<ptrdiff_t>(pos),
              bytes.begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(pos + n, bytes.size())));
        } else {
          bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(pos), n, static_cast<uint8_t>(rng()));
        }
        break;
      }
      case 5: {  // a run of the header copied over another place
        const uint64_t from = below(hdr);
        const uint64_t to = below(hdr);
        const uint64_t n =
            std::min<uint64_t>({1 + below(32), bytes.size() - from, bytes.size() - to});
        std::memmove(bytes.data() + to, bytes.data() + from, n);
        break;
      }
    }
  }
  return bytes;
}

TEST(Mutation, RandomMutationsGiveAFileOrAnError) {
  const std::vector<std::vector<uint8_t>> seeds = {test::small_file(), minimal_small_file()};
  std::mt19937_64 rng(20240607);
  size_t parsed = 0;
  constexpr int kIterations = 4000;
  for (int i = 0; i < kIterations; ++i) {
    const auto& seed = seeds[static_cast<size_t>(i) % seeds.size()];
    const auto mutated = mutate(seed, header_size(seed), rng);
    if (parse_and_use(mutated) == Outcome::kParsed) ++parsed;
    if (::testing::Test::HasFailure()) FAIL() << "at iteration " << i;
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_LT(parsed, static_cast<size_t>(kIterations));
}

TEST(Mutation, AllocProbeSeesLargeAllocations) {
  if (!test::AllocProbe::available()) GTEST_SKIP() << "sanitizer build: ASan caps allocations";
  test::AllocProbe probe;
  std::vector<uint8_t> v(1 << 20);
  volatile uint8_t* touch = v.data();  // keeps the allocation from being elided
  touch[v.size() - 1] = 1;
  EXPECT_GE(probe.largest(), size_t{1} << 20);
}

}  // namespace
}  // namespace tokamak::gguf
