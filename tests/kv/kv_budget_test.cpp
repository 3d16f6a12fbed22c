#include "kv/kv_budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"

namespace tokamak {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = kKiB * 1024;
constexpr double kGiB = kMiB * 1024;
constexpr double kTiB = kGiB * 1024;

void expect_bytes(std::string_view text, double bytes) {
  KVBudget b = KVBudget::parse_memory(text);
  EXPECT_EQ(b.kind, KVBudget::Kind::Bytes) << text;
  EXPECT_EQ(b.value, bytes) << text;
}

void expect_fraction(std::string_view text, double fraction) {
  KVBudget b = KVBudget::parse_memory(text);
  EXPECT_EQ(b.kind, KVBudget::Kind::FractionOfFree) << text;
  EXPECT_DOUBLE_EQ(b.value, fraction) << text;
}

// The Error's message, or "" when parse_memory accepts the text.
std::string parse_error(std::string_view text) {
  try {
    KVBudget::parse_memory(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KVBudget, ParsesByteCounts) {
  expect_bytes("1073741824", kGiB);
  expect_bytes("2", 2);
  expect_bytes("4096B", 4096);
}

TEST(KVBudget, ParsesSuffixesAsPowersOf1024) {
  expect_bytes("4G", 4 * kGiB);
  expect_bytes("512M", 512 * kMiB);
  expect_bytes("64K", 64 * kKiB);
  expect_bytes("2T", 2 * kTiB);
  expect_bytes("4GB", 4 * kGiB);
  expect_bytes("4GiB", 4 * kGiB);
  expect_bytes("4gib", 4 * kGiB);
  expect_bytes("512m", 512 * kMiB);
  expect_bytes("1.5G", 1.5 * kGiB);
  expect_bytes("1.5GiB", 1.5 * kGiB);
  expect_bytes("0.5K", 512);
  expect_bytes(".5M", 512 * kKiB);
  expect_bytes(" 4 GiB ", 4 * kGiB);
  expect_bytes("1024T", 1024 * kTiB);  // the largest accepted: 1 PiB
}

TEST(KVBudget, ParsesFractionsAndPercentOfFreeMemory) {
  expect_fraction("0.3", 0.3);
  expect_fraction(".25", 0.25);
  expect_fraction("1", 1.0);  // a plain number up to 1 is a fraction: all free memory
  expect_fraction("1.0", 1.0);
  expect_fraction("30%", 0.3);
  expect_fraction("12.5%", 0.125);
  expect_fraction("100%", 1.0);
  expect_fraction("0.5%", 0.005);
}

TEST(KVBudget, RejectsBadInputQuotingItAndSayingWhatIsAccepted) {
  for (const char* bad :
       {"",
        "   ",
        "-1",
        "-4G",
        "0",
        "0.0",
        "0G",
        "0%",
        "nan",
        "NaN",
        "inf",
        "abc",
        "G",
        "4X",
        "4GX",
        "4 G B",
        "4G5",
        "1.5",
        "2.5",
        "101%",
        "150%",
        "1e9",
        "0x10",
        "4..5G",
        "1.2.3",
        "%",
        "+4G",
        "99999999T",
        "1025T",
        "2000000000000000000",
        "1000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "0.0001"}) {
    std::string message = parse_error(bad);
    if (std::string_view(bad) == "0.0001") {
      EXPECT_EQ(message, "") << "a tiny fraction is valid; blocks() judges it";
      continue;
    }
    ASSERT_NE(message, "") << "accepted \"" << bad << "\"";
    std::string quoted = std::string(1, '"').append(bad).append(1, '"');
    EXPECT_NE(message.find(quoted), std::string::npos) << message;
    EXPECT_NE(message.find("30%"), std::string::npos) << message;
    EXPECT_NE(message.find("1.5GiB"), std::string::npos) << message;
  }
}

TEST(KVBudget, TokenBudgets) {
  KVBudget b = KVBudget::tokens(8192);
  EXPECT_EQ(b.kind, KVBudget::Kind::Tokens);
  EXPECT_EQ(b.value, 8192);
  EXPECT_THROW(KVBudget::tokens(0), Error);
  EXPECT_THROW(KVBudget::tokens(-5), Error);
}

TEST(KVBudget, BlocksFromBytes) {
  KVBudget b = KVBudget::parse_memory("1M");
  EXPECT_EQ(b.blocks(1024, 16, 0), 1024);
  EXPECT_EQ(b.blocks(1000, 16, 0), 1048);  // rounded down
  EXPECT_EQ(b.blocks(size_t(kMiB), 16, 0), 1);
  EXPECT_THROW(b.blocks(size_t(kMiB) + 1, 16, 0), Error);
}

TEST(KVBudget, BlocksFromFractionOfFree) {
  KVBudget b = KVBudget::parse_memory("25%");
  EXPECT_EQ(b.blocks(1024, 16, 4 * 1024 * 1024), 1024);
  EXPECT_EQ(b.blocks(1024, 16, 4 * 1024 * 1024 + 4000), 1024);  // 1 049 576 bytes
  EXPECT_EQ(b.blocks(1024, 16, 4096), 1);
  EXPECT_THROW(b.blocks(1024, 16, 4095), Error);
  EXPECT_THROW(b.blocks(1024, 16, 0), Error);
}

TEST(KVBudget, BlocksFromTokensRoundUp) {
  EXPECT_EQ(KVBudget::tokens(8192).blocks(1 << 20, 16, 0), 512);
  EXPECT_EQ(KVBudget::tokens(8193).blocks(1 << 20, 16, 0), 513);
  EXPECT_EQ(KVBudget::tokens(1).blocks(1 << 20, 16, 0), 1);
}

TEST(KVBudget, BlocksClampToInt32) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(KVBudget::parse_memory("1024T").blocks(1, 1, 0), kMax);
  EXPECT_EQ(KVBudget::tokens(std::numeric_limits<int64_t>::max()).blocks(64, 1, 0), kMax);
  EXPECT_EQ(KVBudget::parse_memory("1").blocks(2, 1, std::numeric_limits<size_t>::max()), kMax);
}

TEST(KVBudget, TooSmallSaysWhy) {
  try {
    KVBudget::parse_memory("2").blocks(4096, 16, 0);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("2 B"), std::string::npos) << message;
    EXPECT_NE(message.find("4.00 KiB"), std::string::npos) << message;
  }
}

TEST(KVBudget, Describe) {
  EXPECT_EQ(KVBudget::parse_memory("4G").describe(), "4.00 GiB");
  EXPECT_EQ(KVBudget::parse_memory("1.5M").describe(), "1.50 MiB");
  EXPECT_EQ(KVBudget::parse_memory("512").describe(), "512 B");
  EXPECT_EQ(KVBudget{}.describe(), "25% of free memory");
  EXPECT_EQ(KVBudget::parse_memory("0.3").describe(), "30% of free memory");
  EXPECT_EQ(KVBudget::parse_memory("12.5%").describe(), "12.5% of free memory");
  EXPECT_EQ(KVBudget::tokens(8192).describe(), "8192 tokens");
}

TEST(KVBudget, AvailableMemoryIsReadOnLinux) {
  std::optional<size_t> bytes = available_memory_bytes();
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GT(*bytes, size_t(1) << 20);
}

}  // namespace
}  // namespace tokamak
