#include "cli/engine_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace tokamak::cli::engine_flags_test {
namespace {

// Parses `args` (after the program name) with the engine flags and builds the options.
EngineOptions parse(std::vector<std::string> args) {
  CLI::App app;
  EngineFlags flags;
  flags.add_to(app);
  std::vector<const char*> argv = {"tokamak"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return flags.engine_options();
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EngineFlagsTest, DefaultsAreTheEngineDefaults) {
  const EngineOptions o = parse({});
  const EngineOptions d;
  EXPECT_EQ(o.block_size, 16);
  EXPECT_EQ(o.max_batched_tokens, 512);
  EXPECT_EQ(o.max_seqs, 64);
  EXPECT_TRUE(o.chunked_prefill);
  EXPECT_EQ(o.preemption, PreemptionMode::Recompute);
  EXPECT_EQ(o.swap_space_bytes, d.swap_space_bytes);
  EXPECT_EQ(o.max_model_len, 0);
  EXPECT_EQ(o.kv_budget.kind, d.kv_budget.kind);
  EXPECT_EQ(o.kv_budget.value, d.kv_budget.value);
}

TEST(EngineFlagsTest, EveryFlagReachesItsOption) {
  const EngineOptions o = parse({"--kv-memory", "2G", "--block-size", "32", "--max-batched-tokens",
                                 "1024", "--max-seqs", "8", "--no-chunked-prefill", "--preemption",
                                 "swap", "--swap-space", "512M", "--max-model-len", "2048"});
  EXPECT_EQ(o.kv_budget.kind, KVBudget::Kind::Bytes);
  EXPECT_EQ(o.kv_budget.value, 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(o.block_size, 32);
  EXPECT_EQ(o.max_batched_tokens, 1024);
  EXPECT_EQ(o.max_seqs, 8);
  EXPECT_FALSE(o.chunked_prefill);
  EXPECT_EQ(o.preemption, PreemptionMode::Swap);
  EXPECT_EQ(o.swap_space_bytes, size_t{512} << 20);
  EXPECT_EQ(o.max_model_len, 2048);
}

TEST(EngineFlagsTest, PrefixCacheIsOnByDefaultAndSchedulePolicyFcfs) {
  EngineOptions o = parse({});
  EXPECT_TRUE(o.prefix_caching);
  EXPECT_EQ(o.schedule_policy, SchedulePolicy::Fcfs);
  o = parse({"--no-prefix-cache"});
  EXPECT_FALSE(o.prefix_caching);
  o = parse({"--schedule-policy", "lpm", "--lpm-max-bypass", "3"});
  EXPECT_EQ(o.schedule_policy, SchedulePolicy::Lpm);
  EXPECT_EQ(o.lpm_max_bypass, 3);
  EXPECT_THROW(parse({"--schedule-policy", "sjf"}), Error);
  EXPECT_THROW(parse({"--schedule-policy", "lpm", "--no-prefix-cache"}), Error);
  EXPECT_THROW(parse({"--lpm-max-bypass", "-1"}), Error);
}

TEST(EngineFlagsTest, KvMemoryTakesAShareOfFreeMemoryAndKvTokensACount) {
  EngineOptions o = parse({"--kv-memory", "30%"});
  EXPECT_EQ(o.kv_budget.kind, KVBudget::Kind::FractionOfFree);
  EXPECT_DOUBLE_EQ(o.kv_budget.value, 0.3);
  o = parse({"--kv-tokens", "4096"});
  EXPECT_EQ(o.kv_budget.kind, KVBudget::Kind::Tokens);
  EXPECT_EQ(o.kv_budget.value, 4096);
}

TEST(EngineFlagsTest, KvDtypeOneForBothOrKeysCommaValues) {
  EXPECT_EQ(parse({}).kv_dtype, KVDTypes(KVDType::F16));
  EXPECT_EQ(parse({"--kv-dtype", "Q4"}).kv_dtype, KVDTypes(KVDType::Q4));
  EXPECT_EQ(parse({"--kv-dtype", "int8,q4"}).kv_dtype, KVDTypes(KVDType::Int8, KVDType::Q4));
  EXPECT_EQ(parse({"--kv-window", "256", "--kv-sink", "8"}).kv_window, 256);
  for (const char* bad : {"int9", "int8,", ",q4", "int8,q4,f16", ""}) {
    EXPECT_NE(error_of({"--kv-dtype", bad}).find("invalid --kv-dtype"), std::string::npos)
        << bad;
  }
  EXPECT_NE(error_of({"--kv-window", "8"}).find("--kv-window"), std::string::npos);
}

TEST(EngineFlagsTest, BadValuesAreOneLineErrorsNamingTheFlag) {
  EXPECT_NE(error_of({"--kv-memory", "2G", "--kv-tokens", "100"}).find("not both"),
            std::string::npos);
  EXPECT_NE(error_of({"--kv-memory", "lots"}).find("invalid KV memory"), std::string::npos);
  EXPECT_NE(error_of({"--kv-tokens", "0"}).find("must be positive"), std::string::npos);
  EXPECT_NE(error_of({"--preemption", "drop"}).find("--preemption"), std::string::npos);
  EXPECT_NE(error_of({"--preemption", "swap", "--swap-space", "50%"}).find("--swap-space"),
            std::string::npos);
  EXPECT_NE(error_of({"--swap-space", "1G"}).find("--preemption swap"), std::string::npos);
  EXPECT_NE(error_of({"--block-size", "0"}).find("--block-size"), std::string::npos);
  EXPECT_NE(error_of({"--max-seqs", "-1"}).find("--max-seqs"), std::string::npos);
  EXPECT_NE(error_of({"--max-model-len", "-5"}).find("--max-model-len"), std::string::npos);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--block-size", "0"}, {"--preemption", "drop"}, {"--kv-memory", "lots"}}) {
    EXPECT_EQ(error_of(args).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace tokamak::cli::engine_flags_test

namespace tokamak::cli::engine_flags_test {
namespace {

TEST(EngineFlagsTest, KvTiersAreOffByDefaultAndTakeSizes) {
  EngineOptions o = parse({});
  EXPECT_FALSE(o.kv_tiers.any());
  o = parse({"--kv-host-bytes", "2G", "--kv-disk-dir", "/tmp/kv", "--kv-disk-bytes", "512M"});
  EXPECT_EQ(o.kv_tiers.host_bytes, size_t{2} << 30);
  EXPECT_EQ(o.kv_tiers.disk_dir, "/tmp/kv");
  EXPECT_EQ(o.kv_tiers.disk_bytes, size_t{512} << 20);
  EXPECT_FALSE(o.kv_tiers.model_identity) << "set by tag_model once the model is loaded";
  EXPECT_THROW(parse({"--kv-disk-dir", "/tmp/kv"}), Error) << "no bound";
  EXPECT_THROW(parse({"--kv-disk-bytes", "1G"}), Error) << "no directory";
  EXPECT_THROW(parse({"--kv-disk-dir", "/tmp/kv", "--kv-disk-bytes", "0"}), Error);
  EXPECT_THROW(parse({"--kv-host-bytes", "30%"}), Error) << "a size, not a share";
  EXPECT_THROW(parse({"--kv-host-bytes", "1G", "--no-prefix-cache"}), Error);
  EXPECT_THROW(parse({"--kv-host-bytes", "1G", "--preemption", "swap", "--swap-space", "1G"}),
               Error)
      << "one host budget";
}

}  // namespace
}  // namespace tokamak::cli::engine_flags_test

namespace tokamak::cli::engine_flags_test {
namespace {

// -t and --affinity as every model-running command takes them: the OS places the threads
// unless asked, and the spec reaches the model's options as given (load_model parses it).
TEST(ThreadFlagsTest, ThreadsAndAffinityReachTheirFields) {
  const auto parse_threads = [](std::vector<std::string> args) {
    CLI::App app;
    int threads = -1;
    std::string affinity = "none";
    add_thread_flags(app, threads, affinity);
    std::vector<const char*> argv = {"tokamak"};
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return std::pair{threads, affinity};
  };
  EXPECT_EQ(parse_threads({}), std::pair(-1, std::string("none")));
  EXPECT_EQ(parse_threads({"-t", "2", "--affinity", "0-1"}), std::pair(2, std::string("0-1")));
  EXPECT_EQ(parse_threads({"--threads", "0", "--affinity", "auto"}),
            std::pair(0, std::string("auto")));
  EXPECT_THROW(parse_threads({"-t", "-1"}), CLI::ValidationError);
}

}  // namespace
}  // namespace tokamak::cli::engine_flags_test
