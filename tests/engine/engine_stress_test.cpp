// A seeded random workload on a tiny model with a small KV pool, thousands of engine steps in
// all: requests arrive at random steps with random prompt and output lengths, priorities, n
// and sampling (greedy or seeded), and are cancelled at random (waiting, running, preempted,
// twice, unknown ids). After every step: the pool is consistent and holds no more blocks than
// the live samples' tokens need, and the streams obey their rules (OutputLog). At the end:
// every sample ended exactly once with a reason that fits its tokens, every sample that was
// not cancelled equals its solo run (cancelled ones a prefix of it), and the pool is free.
// Some seeds put KV tiers under the prefix cache (a small host tier, sometimes a small disk
// tier in a temporary directory), drawn from a generator of their own so that the other
// draws of every seed stay as they were.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "format/gguf_identity.h"

namespace tokamak::engine_stress_test {
namespace {

SyntheticModelSpec tiny_spec() {
  SyntheticModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 64;  // heads of 32: the narrowest every KV dtype stores
  s.n_layer = 2;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.n_ff = 64;
  s.n_ctx = 128;
  s.seed = 11;
  s.name = "stress";
  return s;
}

struct Coverage {
  int64_t steps = 0;
  int64_t requests = 0;
  int64_t preemptions = 0;
  int64_t cancelled_waiting = 0;    // cancelled before any token was computed for it
  int64_t cancelled_running = 0;    // cancelled after output, never preempted
  int64_t cancelled_preempted = 0;  // cancelled after being preempted at least once
  int64_t finished_after_preemption = 0;
  int64_t multi_sample = 0;
  int64_t seeded = 0;
  int64_t shared_prefix = 0;   // requests whose prompt starts with a shared prefix
  int64_t prefix_hits = 0;     // tokens taken from the prefix cache
  int64_t window_dropped = 0;  // tokens slid out by a KV window
  int64_t tier_seeds = 0;      // seeds run with a host or disk tier
  int64_t disk_seeds = 0;      // of them, with a disk tier
  int64_t tier_hits = 0;       // blocks copied back from a tier
  int64_t tier_swaps_in = 0;   // swapped sequences back in, in seeds with a tier
};

// A temporary directory for a disk tier, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tokamak_stress_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// One seed's run. Options, workload and cancellations are all drawn from `seed`.
void run_seed(const test::TestModel& m, uint64_t seed, Coverage& cov) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  EngineOptions o;
  const int32_t block_sizes[] = {1, 2, 4, 16};
  o.block_size = block_sizes[uniform(0, 3)];
  o.chunked_prefill = !chance(0.25);
  const int32_t budgets[] = {4, 8, 16, 32, 64};
  o.max_batched_tokens = o.chunked_prefill ? budgets[uniform(0, 4)] : 48;
  const int32_t seqs[] = {2, 4, 8, 64};
  o.max_seqs = seqs[uniform(0, 3)];
  o.preemption = chance(0.5) ? PreemptionMode::Swap : PreemptionMode::Recompute;
  const bool limited_swap = chance(0.3);
  // Room for one longest sequence (64 tokens) to about two and a half.
  int64_t pool_tokens = uniform(64, 160);
  o.prefix_caching = !chance(0.2);
  if (o.prefix_caching && chance(0.4)) {
    o.schedule_policy = SchedulePolicy::Lpm;
    o.lpm_max_bypass = int32_t(uniform(0, 4));
  }
  const KVDType dtypes[] = {KVDType::F16, KVDType::Int8, KVDType::Fp8, KVDType::Q4};
  o.kv_dtype = chance(0.5) ? KVDType::F16 : dtypes[uniform(1, 3)];
  if (o.kv_dtype.k == KVDType::Q4 && chance(0.5)) o.kv_dtype.k = KVDType::Int8;  // int8,q4
  // A sliding KV window for some seeds: small enough that 64-token sequences slide, and a
  // pool that holds one window. Outputs then depend on how prompts were chunked (see
  // engine/kv_window.h), so those seeds skip the solo comparison and keep every other check.
  if (chance(0.2)) {
    o.kv_window = std::max(o.block_size, 16);
    o.kv_sink = int32_t(uniform(0, 4));
    const int64_t sink = (o.kv_sink + o.block_size - 1) / o.block_size * o.block_size;
    pool_tokens = std::max(pool_tokens, sink + o.kv_window + o.block_size + o.max_batched_tokens);
  }
  // Heavy hitters (engine/kv_heavy.h) for half of the windowed seeds, and a hot window for
  // some quantized ones (kv/paged_kv_cache.h): one block with the prefix cache (wider ones
  // need it off), within the sliding window's recent tokens. Drawn from a generator of their
  // own, as the tiers below, so the other draws of every seed stay as they were.
  std::mt19937_64 kv_rng(seed * 1000033 + 29);
  auto kv_uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(kv_rng);
  };
  if (o.kv_window >= 2 * o.block_size && kv_uniform(0, 1) == 1) {
    const int64_t most = (o.kv_window - o.block_size) / o.block_size;  // a recent block stays
    o.kv_heavy = int32_t(kv_uniform(1, most)) * o.block_size;
  }
  if (o.kv_dtype.v != KVDType::F16 && kv_uniform(0, 4) < 2) {
    o.kv_hot_window = int32_t(kv_uniform(1, 48));
    if (o.prefix_caching) o.kv_hot_window = std::min(o.kv_hot_window, o.block_size);
    if (o.kv_window > 0) {
      o.kv_hot_window = std::min(o.kv_hot_window,
                                 (o.kv_window - o.kv_heavy) / o.block_size * o.block_size);
    }
  }
  o.kv_budget = KVBudget::tokens(pool_tokens);
  KVCacheShape shape = m.model->kv_shape(o.block_size);
  shape.dtype = o.kv_dtype;
  if (limited_swap) o.swap_space_bytes = 3 * shape.bytes_per_block();
  // Tiers: a host tier of 2 to 40 blocks (swapped blocks share it), sometimes a disk tier of
  // 4 to 40 blocks beside or instead of it.
  std::mt19937_64 tier_rng(seed * 1000003 + 17);
  auto tier_uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(tier_rng);
  };
  std::unique_ptr<TempDir> disk_dir;
  if (o.prefix_caching && tier_uniform(0, 3) > 0) {
    const size_t block = shape.bytes_per_block();
    if (tier_uniform(0, 3) > 0) o.kv_tiers.host_bytes = size_t(tier_uniform(2, 40)) * block;
    if (o.kv_tiers.host_bytes == 0 || tier_uniform(0, 1) == 1) {
      disk_dir = std::make_unique<TempDir>();
      o.kv_tiers.disk_dir = disk_dir->path.string();
      o.kv_tiers.disk_bytes = size_t(tier_uniform(4, 40)) * (block + 512);
      o.kv_tiers.model_identity = gguf::content_identity(*m.gguf);
      ++cov.disk_seeds;
    }
    ++cov.tier_seeds;
  }
  SCOPED_TRACE(::testing::Message()
               << "seed " << seed << ": block " << o.block_size << ", max_batched_tokens "
               << o.max_batched_tokens << ", chunked " << o.chunked_prefill << ", max_seqs "
               << o.max_seqs << ", " << preemption_mode_name(o.preemption) << ", swap bytes "
               << o.swap_space_bytes << ", pool " << o.kv_budget.describe() << ", prefix cache "
               << o.prefix_caching << ", " << schedule_policy_name(o.schedule_policy) << ", kv "
               << kv_dtypes_name(o.kv_dtype) << ", kv window " << o.kv_window << ", heavy "
               << o.kv_heavy << ", hot window "
               << o.kv_hot_window << ", host tier "
               << o.kv_tiers.host_bytes << " B, disk tier " << o.kv_tiers.disk_bytes << " B");

  EngineCore core(*m.model, *m.tok, o);
  const int32_t max_len = std::min(core.max_model_len(), 64);
  const bool compare_with_solo = o.kv_window == 0;
  ASSERT_GE(max_len, 8);
  const int32_t vocab = m.tok->n_vocab();

  test::OutputLog log;
  std::map<uint64_t, Request> requests;
  std::set<uint64_t> cancelled;
  std::vector<RequestOutput> out;
  uint64_t next_id = 1;
  const int64_t arrival_steps = 700;
  const std::vector<int32_t> shared_prefixes[] = {test::random_prompt(seed * 7 + 1, 64, vocab),
                                                  test::random_prompt(seed * 7 + 2, 64, vocab),
                                                  test::random_prompt(seed * 7 + 3, 64, vocab)};
  int64_t last_preemptions = 0;

  auto add_random_request = [&] {
    const uint64_t id = next_id++;
    const int32_t max_prompt =
        std::min<int32_t>(max_len - 1, o.chunked_prefill ? 40 : o.max_batched_tokens);
    const int32_t prompt_len = int32_t(uniform(1, max_prompt));
    const int32_t max_tokens = int32_t(uniform(1, std::min(24, max_len - prompt_len)));
    SamplingParams p = test::greedy(max_tokens, /*ignore_eos=*/chance(0.5));
    if (chance(0.25)) {
      p.temperature = 0.9f;
      p.top_k = chance(0.5) ? 20 : 0;
      p.seed = uniform(0, 1000);
      ++cov.seeded;
    }
    if (chance(0.2)) p.logprobs = 2;
    const int32_t n = chance(0.2) ? std::min(int32_t(uniform(2, 3)), o.max_seqs) : 1;
    if (n > 1) ++cov.multi_sample;
    std::vector<int32_t> prompt = test::random_prompt(seed * 100003 + id, prompt_len, vocab);
    if (chance(0.5)) {
      // Shared prefixes (a "system prompt" of a few per seed, cut anywhere) for the prefix
      // cache: some prompts are all prefix, some repeat an earlier prompt exactly.
      const auto& shared = shared_prefixes[size_t(uniform(0, 2))];
      const size_t cut = size_t(uniform(1, prompt_len));
      std::copy(shared.begin(), shared.begin() + long(cut), prompt.begin());
      ++cov.shared_prefix;
    }
    Request r = test::make_request(std::move(prompt), p, n, int32_t(uniform(0, 2)));
    log.expect(id, r);
    core.add_request(id, r);
    requests.emplace(id, std::move(r));
    ++cov.requests;
  };
  auto cancel = [&](uint64_t id) {
    core.cancel(id);
    cancelled.insert(id);
  };

  int64_t step = 0;
  for (; step < 20000; ++step) {
    if (step < arrival_steps) {
      if (chance(0.3)) add_random_request();
      if (chance(0.02)) {  // a burst
        for (int i = 0; i < 4; ++i) add_random_request();
      }
      if (chance(0.05) && next_id > 1) {
        const uint64_t id = uint64_t(uniform(1, int64_t(next_id - 1)));
        cancel(id);
        if (chance(0.2)) cancel(id);  // twice
      }
      if (chance(0.01)) core.cancel(next_id + 1000);  // unknown: ignored
      // Right after a preemption, cancel the lowest-ranked live request that has output: the
      // likeliest victim, so preempted and swapped sequences get cancelled too.
      if (core.stats().preemptions > last_preemptions && chance(0.5)) {
        const uint64_t* victim = nullptr;
        for (const auto& [id, r] : requests) {
          if (log.finished(id) || cancelled.count(id)) continue;
          if (log.at(id, 0).tokens.empty()) continue;
          if (!victim ||
              std::tuple(r.priority, id) > std::tuple(requests.at(*victim).priority, *victim)) {
            victim = &id;
          }
        }
        if (victim) cancel(*victim);
      }
    }
    last_preemptions = core.stats().preemptions;
    out.clear();
    const bool worked = core.step(out);
    log.absorb(out);
    test::check_step(core, log);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopped at step " << step;
      return;
    }
    if (!worked && step >= arrival_steps) break;
  }
  cov.steps += step;
  cov.preemptions += core.stats().preemptions;
  cov.prefix_hits += core.stats().prefix_cache_hits;
  cov.window_dropped += core.stats().kv_window_dropped_tokens;
  cov.tier_hits += core.stats().kv_tiers.host_hits + core.stats().kv_tiers.disk_hits;
  if (o.kv_tiers.any()) cov.tier_swaps_in += core.stats().swaps_in;
  ASSERT_TRUE(log.unfinished().empty())
      << log.unfinished().size() << " samples unfinished after " << step << " steps";
  test::expect_all_free(core);

  // Every sample against its solo run, on a separate engine with a roomy pool, no prefix
  // cache and the same KV dtype.
  EngineOptions solo_options = test::no_cache_options();
  solo_options.kv_dtype = o.kv_dtype;
  // q4 keys are encoded per block, and a hot window decides which blocks are read encoded:
  // both change what a token sees (kv/paged_kv_cache.h), so the solo run shares them.
  solo_options.block_size = o.block_size;
  solo_options.kv_hot_window = o.kv_hot_window;
  EngineCore solo_core(*m.model, *m.tok, solo_options);
  for (const auto& [id, r] : requests) {
    for (int32_t i = 0; i < r.n; ++i) {
      SCOPED_TRACE(::testing::Message() << "request " << id << " sample " << i);
      const test::SampleResult& s = log.at(id, i);
      ASSERT_TRUE(s.finish.has_value() && s.metrics.has_value());
      const int32_t max_tokens = *r.params.max_tokens;
      EXPECT_LE(int32_t(s.tokens.size()), max_tokens);
      EXPECT_EQ(s.metrics->output_tokens, int32_t(s.tokens.size()));
      EXPECT_NE(*s.finish, FinishReason::Error) << s.error;

      const bool was_cancelled = *s.finish == FinishReason::Cancelled;
      if (was_cancelled) {
        EXPECT_TRUE(cancelled.count(id)) << "cancelled, but nobody cancelled it";
        if (s.metrics->preemptions > 0) {
          ++cov.cancelled_preempted;
        } else if (s.tokens.empty() && s.metrics->first_scheduled == Clock::time_point{}) {
          ++cov.cancelled_waiting;
        } else if (!s.tokens.empty()) {
          ++cov.cancelled_running;
        }
      } else {
        if (s.metrics->preemptions > 0) ++cov.finished_after_preemption;
        const bool eos = !r.params.ignore_eos && !s.tokens.empty() &&
                         m.tok->is_end_of_generation(s.tokens.back());
        if (*s.finish == FinishReason::Length) {
          EXPECT_EQ(int32_t(s.tokens.size()), max_tokens);
          EXPECT_FALSE(eos) << "ended by EOS yet reported length";
        } else {
          EXPECT_EQ(*s.finish, FinishReason::Stop);
          EXPECT_TRUE(eos) << "stop without EOS or a stop condition";
        }
      }
      if (!r.params.ignore_eos) {
        for (size_t t = 0; t + 1 < s.tokens.size(); ++t) {
          EXPECT_FALSE(m.tok->is_end_of_generation(s.tokens[t])) << "tokens after EOS";
        }
      }

      if (!compare_with_solo) {
        if (::testing::Test::HasFailure()) return;
        continue;
      }
      Request alone = r;
      if (alone.params.seed) alone.params.seed = *alone.params.seed + uint64_t(i);
      const test::SampleResult ref = test::run_alone(solo_core, alone, id);
      if (was_cancelled) {
        ASSERT_LE(s.tokens.size(), ref.tokens.size());
        EXPECT_TRUE(std::equal(s.tokens.begin(), s.tokens.end(), ref.tokens.begin()))
            << "a cancelled sample's tokens are not a prefix of its solo run\n   got: "
            << test::str(s.tokens) << "\n  solo: " << test::str(ref.tokens);
      } else {
        EXPECT_EQ(s.tokens, ref.tokens)
            << "\n   got: " << test::str(s.tokens) << "\n  solo: " << test::str(ref.tokens);
        EXPECT_EQ(*s.finish, *ref.finish);
        EXPECT_EQ(s.text, ref.text);
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
  test::expect_all_free(solo_core);
}

TEST(EngineStressTest, RandomWorkloadsWithCancellationsAndPreemption) {
  const auto m = test::load_synthetic(tiny_spec());
  Coverage cov;
  for (uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
    run_seed(*m, seed, cov);
    if (HasFailure()) break;
  }
  std::printf(
      "stress: %lld steps, %lld requests (%lld with n > 1, %lld seeded), %lld preemptions; "
      "cancelled %lld waiting, %lld running, %lld after preemption; %lld finished after "
      "preemption; %lld prefix-cache hit tokens; %lld tokens slid out by KV windows; %lld "
      "seeds with tiers (%lld with disk), %lld tier hit blocks, %lld swaps in with tiers\n",
      (long long)cov.steps, (long long)cov.requests, (long long)cov.multi_sample,
      (long long)cov.seeded, (long long)cov.preemptions, (long long)cov.cancelled_waiting,
      (long long)cov.cancelled_running, (long long)cov.cancelled_preempted,
      (long long)cov.finished_after_preemption, (long long)cov.prefix_hits,
      (long long)cov.window_dropped, (long long)cov.tier_seeds, (long long)cov.disk_seeds,
      (long long)cov.tier_hits, (long long)cov.tier_swaps_in);
  if (HasFailure()) return;
  // The workload must have reached what it is meant to test.
  EXPECT_GE(cov.steps, 3000);
  EXPECT_GT(cov.preemptions, 0);
  EXPECT_GT(cov.shared_prefix, 0);
  EXPECT_GT(cov.prefix_hits, 0) << "the prefix cache was never hit";
  EXPECT_GT(cov.window_dropped, 0) << "no KV window ever slid";
  EXPECT_GT(cov.tier_hits, 0) << "no block ever came back from a KV tier";
  EXPECT_GT(cov.tier_swaps_in, 0) << "no swap ever went through the tiers";
  EXPECT_GT(cov.disk_seeds, 0);
  EXPECT_GT(cov.cancelled_waiting, 0);
  EXPECT_GT(cov.cancelled_running, 0);
  EXPECT_GT(cov.cancelled_preempted, 0);
  EXPECT_GT(cov.finished_after_preemption, 0);
}

}  // namespace
}  // namespace tokamak::engine_stress_test
