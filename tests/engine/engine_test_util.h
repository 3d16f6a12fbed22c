#pragma once
// Helpers for the serving-engine tests: tiny synthetic models (or the default model) with
// their tokenizer, a log of RequestOutputs that checks the stream rules as it reads them,
// a driver that feeds requests to an EngineCore at given steps, and solo reference runs.
//
// The stream rules OutputLog::absorb checks on every event:
//   - the request is known and the sample index is in [0, n);
//   - no event after a sample's final one, and exactly one final event per sample;
//   - event times never go back; logprobs (when asked for) one per token;
//   - a final event carries metrics, a non-final one none.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../model/model_test_util.h"
#include "engine/engine_core.h"
#include "engine/request.h"
#include "format/gguf.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::test {

// A loaded model and its tokenizer (the GGUF file stays mapped while this lives).
struct TestModel {
  std::unique_ptr<TempFile> file;  // null for a model file that is not temporary
  std::shared_ptr<const gguf::File> gguf;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

// The tiny llama the engine tests run on: 2 layers, 128 wide, 512 tokens of vocabulary; heads
// of 32, the narrowest that every KV dtype stores (q4 groups are 32 wide).
inline SyntheticModelSpec small_spec() {
  SyntheticModelSpec s;
  s.n_vocab = 512;
  s.n_embd = 128;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 128;
  s.n_ctx = 256;
  s.seed = 7;
  return s;
}

// Writes `synthetic` to a temporary file and loads it.
inline std::unique_ptr<TestModel> load_model(const SyntheticModel& synthetic, int threads = 1,
                                             int32_t max_batch_tokens = 512) {
  auto m = std::make_unique<TestModel>();
  m->file = std::make_unique<TempFile>("engine");
  m->gguf = write_and_open(synthetic, *m->file);
  m->model = Model::load(m->gguf, options(threads, max_batch_tokens));
  m->tok = Tokenizer::from_gguf(*m->gguf);
  return m;
}

inline std::unique_ptr<TestModel> load_synthetic(const SyntheticModelSpec& spec, int threads = 1,
                                                 int32_t max_batch_tokens = 512) {
  return load_model(make_synthetic_model(spec), threads, max_batch_tokens);
}

// The default model, or null when models/ does not have it.
inline std::unique_ptr<TestModel> load_default_model(int threads, int32_t max_batch_tokens) {
  if (!std::filesystem::exists(default_model_path())) return nullptr;
  auto m = std::make_unique<TestModel>();
  m->gguf = open_shared(default_model_path());
  m->model = Model::load(m->gguf, options(threads, max_batch_tokens));
  m->tok = Tokenizer::from_gguf(*m->gguf);
  return m;
}

inline SamplingParams greedy(int32_t max_tokens, bool ignore_eos = true) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = ignore_eos;
  return p;
}

inline Request make_request(std::vector<int32_t> prompt, SamplingParams params, int32_t n = 1,
                            int32_t priority = 0) {
  Request r;
  r.prompt = std::move(prompt);
  r.params = std::move(params);
  r.n = n;
  r.priority = priority;
  return r;
}

// `n` token ids drawn from [3, vocab) (past <unk>, <s>, </s>), reproducibly from `seed`.
inline std::vector<int32_t> random_prompt(uint64_t seed, int32_t n, int32_t vocab) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = id(rng);
  return p;
}

// Text of output tokens as a stream shows it: pieces after a prompt, special tokens left
// out, an unfinished UTF-8 tail repaired at the end.
inline std::string detokenize(const Tokenizer& tok, const std::vector<int32_t>& tokens) {
  Detokenizer d(tok, /*skip_special=*/true, /*at_text_start=*/false);
  std::string text;
  for (int32_t t : tokens) text += d.push(t);
  return text + d.flush();
}

inline std::string str(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t t : v) s += std::to_string(t) + " ";
  return s;
}

// Large enough for every test workload, small enough to allocate in a blink.
inline EngineOptions roomy_options() {
  EngineOptions o;
  o.block_size = 16;
  o.kv_budget = KVBudget::tokens(8192);
  o.max_batched_tokens = 512;
  o.max_seqs = 64;
  o.chunked_prefill = true;
  return o;
}

// roomy_options() without the prefix cache: the oracle of the cache-on/off comparisons.
inline EngineOptions no_cache_options() {
  EngineOptions o = roomy_options();
  o.prefix_caching = false;
  return o;
}

// What one sample's stream delivered.
struct SampleResult {
  std::vector<int32_t> tokens;
  std::string text;
  std::optional<FinishReason> finish;
  std::optional<SampleMetrics> metrics;
  std::string error;
  int32_t events = 0;
  std::optional<Clock::time_point> last_time;
};

class OutputLog {
 public:
  struct RequestInfo {
    int32_t n = 1;
    int32_t prompt_len = 0;
    bool logprobs = false;
  };

  void expect(uint64_t id, const Request& r) {
    requests_[id] = {r.n, static_cast<int32_t>(r.prompt.size()), r.params.logprobs.has_value()};
    for (int32_t i = 0; i < r.n; ++i) samples_[{id, i}];
  }

  void absorb(const RequestOutput& o) {
    auto req = requests_.find(o.request_id);
    if (req == requests_.end()) {
      ADD_FAILURE() << "output for unknown request " << o.request_id;
      return;
    }
    if (o.index < 0 || o.index >= req->second.n) {
      ADD_FAILURE() << "request " << o.request_id << ": sample index " << o.index << " outside [0, "
                    << req->second.n << ")";
      return;
    }
    SampleResult& s = samples_[{o.request_id, o.index}];
    if (s.finish) {
      ADD_FAILURE() << "request " << o.request_id << " sample " << o.index
                    << ": event after its final one (" << finish_reason_name(*s.finish)
                    << "), with " << o.token_ids.size() << " tokens";
    }
    if (s.last_time && o.time < *s.last_time) {
      ADD_FAILURE() << "request " << o.request_id << " sample " << o.index
                    << ": event time went back";
    }
    if (req->second.logprobs && o.logprobs.size() != o.token_ids.size()) {
      ADD_FAILURE() << "request " << o.request_id << " sample " << o.index << ": "
                    << o.logprobs.size() << " logprobs for " << o.token_ids.size() << " tokens";
    }
    if (o.finish.has_value() != o.metrics.has_value()) {
      ADD_FAILURE() << "request " << o.request_id << " sample " << o.index
                    << ": metrics must come with the final event, and only with it";
    }
    s.last_time = o.time;
    ++s.events;
    s.tokens.insert(s.tokens.end(), o.token_ids.begin(), o.token_ids.end());
    s.text += o.text;
    if (o.finish) {
      s.finish = o.finish;
      s.metrics = o.metrics;
      s.error = o.error;
    }
  }

  void absorb(const std::vector<RequestOutput>& outs) {
    for (const auto& o : outs) absorb(o);
  }

  const SampleResult& at(uint64_t id, int32_t index) const { return samples_.at({id, index}); }
  const std::map<std::pair<uint64_t, int32_t>, SampleResult>& samples() const { return samples_; }
  const std::map<uint64_t, RequestInfo>& requests() const { return requests_; }

  bool finished(uint64_t id) const {
    const auto& info = requests_.at(id);
    for (int32_t i = 0; i < info.n; ++i) {
      if (!samples_.at({id, i}).finish) return false;
    }
    return true;
  }

  // Samples without their final event.
  std::vector<std::pair<uint64_t, int32_t>> unfinished() const {
    std::vector<std::pair<uint64_t, int32_t>> out;
    for (const auto& [key, s] : samples_) {
      if (!s.finish) out.push_back(key);
    }
    return out;
  }

  // Most KV blocks the live samples could hold: each unfinished sample's tokens (prompt and
  // the outputs streamed so far) in blocks of their own. A finished sample holds none.
  int64_t block_bound(int32_t block_size) const {
    int64_t bound = 0;
    for (const auto& [key, s] : samples_) {
      if (s.finish) continue;
      const int64_t len = requests_.at(key.first).prompt_len + int64_t(s.tokens.size());
      bound += (len + block_size - 1) / block_size;
    }
    return bound;
  }

 private:
  std::map<uint64_t, RequestInfo> requests_;
  std::map<std::pair<uint64_t, int32_t>, SampleResult> samples_;
};

// Checks, after one step, what must hold of the pool and the last step at all times.
inline void check_step(const EngineCore& core, const OutputLog& log) {
  const BlockPool& pool = core.kv_cache().pool();
  const EngineStats st = core.stats();
  const EngineOptions& o = core.options();
  EXPECT_GE(pool.n_free(), 0);
  EXPECT_LE(pool.n_used(), pool.n_blocks());
  // Used blocks: held by sequences, or cached with no sequence using them.
  EXPECT_EQ(st.kv_blocks_used + st.kv_blocks_evictable, pool.n_used());
  EXPECT_LE(st.kv_blocks_evictable, st.kv_blocks_cached);
  EXPECT_LE(st.prefix_cache_hits, st.prefix_cache_queries);
  // The prefix cache's ownership rule: it holds one reference on each block it names, and a
  // block it may evict (no lock on it) has no other owner, so evicting it frees it.
  if (const PrefixCache* cache = core.prefix_cache()) {
    int32_t evictable = 0;
    for (int32_t b = 0; b < pool.n_blocks(); ++b) {
      if (!cache->cached(b)) continue;
      EXPECT_GE(pool.ref_count(b), 1) << "block " << b;
      if (cache->evictable(b)) {
        ++evictable;
        EXPECT_EQ(pool.ref_count(b), 1) << "evictable block " << b << " still has owners";
      }
    }
    EXPECT_EQ(evictable, cache->n_evictable());
  }
  EXPECT_EQ(st.kv_blocks_total, pool.n_blocks());
  EXPECT_LE(st.last_step_tokens, o.max_batched_tokens);
  EXPECT_LE(st.last_step_seqs, o.max_seqs);
  EXPECT_LE(st.running, o.max_seqs);
  // Blocks outside the prefix cache belong to sequences: no more than their tokens fill.
  EXPECT_LE(pool.n_used() - st.kv_blocks_cached, log.block_bound(o.block_size))
      << "blocks in use beyond what the unfinished samples' tokens need: a leak";
}

// Steps an EngineCore by hand, logging its outputs and checking check_step() after each step.
class Driver {
 public:
  explicit Driver(EngineCore& core) : core_(core) {}

  void add(uint64_t id, const Request& r) {
    log.expect(id, r);
    core_.add_request(id, r);
  }
  // One step; false when the engine had nothing to do.
  bool step() {
    out_.clear();
    const bool worked = core_.step(out_);
    const bool failed_before = ::testing::Test::HasFailure();
    log.absorb(out_);
    check_step(core_, log);
    if (!failed_before && ::testing::Test::HasFailure()) {
      ADD_FAILURE() << "after step " << steps << " (counting from 0)";
      broken = true;
    }
    ++steps;
    return worked;
  }
  // Steps until the engine is idle (at most max_steps) or a check fails; true when every
  // sample finished.
  bool finish(int64_t max_steps = 20000) {
    for (int64_t i = 0; i < max_steps && !broken; ++i) {
      if (!step()) break;
    }
    return !broken && log.unfinished().empty();
  }

  OutputLog log;
  int64_t steps = 0;
  bool broken = false;  // a check failed: stop driving, the rest would only repeat it

 private:
  EngineCore& core_;
  std::vector<RequestOutput> out_;
};

// A request to add to the engine before step `step` (0 = before the first).
struct Arrival {
  int64_t step = 0;
  uint64_t id = 0;
  Request request;
};

struct DriveResult {
  OutputLog log;
  int64_t steps = 0;
  bool completed = false;  // every sample finished within the step limit
};

// Feeds `arrivals` to `core` at their steps and steps it until every sample has finished,
// checking check_step() after every step. Stops (completed = false) after max_steps.
inline DriveResult drive(EngineCore& core, std::vector<Arrival> arrivals,
                         int64_t max_steps = 20000) {
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const Arrival& a, const Arrival& b) { return a.step < b.step; });
  Driver d(core);
  size_t next = 0;
  for (int64_t step = 0; step < max_steps; ++step) {
    while (next < arrivals.size() && arrivals[next].step <= step) {
      d.add(arrivals[next].id, arrivals[next].request);
      ++next;
    }
    const bool worked = d.step();
    if (!worked && next == arrivals.size()) break;
    if (d.broken) break;
  }
  DriveResult r;
  r.completed = !d.broken && next == arrivals.size() && d.log.unfinished().empty();
  r.steps = d.steps;
  r.log = std::move(d.log);
  return r;
}

// The tokens of sample 0 of `request` run alone (n = 1) on `core`, which must be idle.
inline SampleResult run_alone(EngineCore& core, Request request, uint64_t id = 1) {
  request.n = 1;
  DriveResult r = drive(core, {{0, id, std::move(request)}});
  EXPECT_TRUE(r.completed) << "a request alone did not finish in " << r.steps << " steps";
  return r.log.at(id, 0);
}

// Expects that every request finished or was cancelled and nothing is held any more: every
// block is free or cached with no lock on it, and once the prefix cache is cleared (it is,
// here) every block is free.
inline void expect_all_free(EngineCore& core) {
  EXPECT_FALSE(core.has_work());
  EXPECT_EQ(core.n_requests(), 0u) << "finished requests are still held";
  const EngineStats st = core.stats();
  EXPECT_EQ(core.kv_cache().pool().n_used(), st.kv_blocks_evictable)
      << "KV blocks leaked (held by no sequence, yet not evictable)";
  EXPECT_EQ(st.kv_blocks_cached, st.kv_blocks_evictable) << "prefix-cache locks leaked";
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.kv_swapped_bytes, 0u) << "swapped host memory leaked";
  core.clear_prefix_cache();
  EXPECT_EQ(core.kv_cache().pool().n_used(), 0) << "KV blocks leaked";
  EXPECT_EQ(core.stats().kv_blocks_cached, 0);
}

// How a parameterized engine test submits its requests: one per step, or all before the
// first step.
enum class Arrivals { Staggered, AllAtOnce };

inline void PrintTo(Arrivals a, std::ostream* os) {
  *os << (a == Arrivals::Staggered ? "staggered" : "all at once");
}

// The test name of a (Config with a `name`, Arrivals) parameter: "<name>_Staggered" or
// "<name>_AllAtOnce".
template <class ParamInfo>
std::string config_and_arrivals_name(const ParamInfo& info) {
  return std::string(std::get<0>(info.param).name) +
         (std::get<1>(info.param) == Arrivals::Staggered ? "_Staggered" : "_AllAtOnce");
}

}  // namespace tokamak::test
