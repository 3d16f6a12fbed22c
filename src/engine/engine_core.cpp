#include "engine/engine_core.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/error.h"
#include "engine/kv_layout.h"
#include "engine/sample_state.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {
namespace {

PagedKVCache make_cache(const Model& model, const EngineOptions& opts) {
  if (auto err = validate(opts)) throw Error("engine options: " + *err);
  const KVLayout layout = kv_layout(model, opts.block_size, opts.kv_dtype, opts.kv_hot_window,
                                    opts.max_seqs, opts.max_batched_tokens);
  const size_t block_bytes = layout.shape.bytes_per_block();
  const size_t free_bytes = available_memory_bytes().value_or(0);
  int64_t n_blocks = opts.kv_budget.blocks(block_bytes, opts.block_size, free_bytes);
  // The hot copies come out of a memory budget (a token budget counts main-pool tokens).
  if (layout.hot_window_blocks > 0 && opts.kv_budget.kind != KVBudget::Kind::Tokens) {
    n_blocks -= static_cast<int64_t>((layout.hot_bytes() + block_bytes - 1) / block_bytes);
    if (n_blocks < 1) {
      throw Error("engine: the KV memory budget does not cover the hot window's F16 copies (" +
                  std::to_string(layout.hot_bytes()) +
                  " bytes); raise --kv-memory or lower --max-seqs");
    }
  }
  return layout.make(static_cast<int32_t>(n_blocks));
}

SamplingParams params_of_sample(const SamplingParams& params, int32_t index) {
  SamplingParams p = params;
  if (p.seed) p.seed = *p.seed + static_cast<uint64_t>(index);
  return p;
}

}  // namespace

struct EngineCore::RequestState {
  uint64_t id = 0;
  int32_t n = 1;
  SamplingParams params;
  Clock::time_point arrival;
  std::vector<std::unique_ptr<Sequence>> samples;  // index order; grows when forked
  int32_t n_finished = 0;
};

EngineCore::EngineCore(Model& model, const Tokenizer& tokenizer, const EngineOptions& opts)
    : model_(model),
      tokenizer_(tokenizer),
      opts_(opts),
      kv_(make_cache(model, opts)),
      blocks_(kv_, opts.prefix_caching, opts.kv_tiers),
      scheduler_(opts_, blocks_),
      runner_(model, opts.max_batched_tokens, opts.max_seqs,
              /*track_attention=*/opts.kv_window > 0 && opts.kv_heavy > 0) {
  const HParams& hp = model.hparams();
  if (model.max_batch_tokens() < opts.max_batched_tokens) {
    throw Error("engine: max_batched_tokens " + std::to_string(opts.max_batched_tokens) +
                " exceeds the model's max_batch_tokens " +
                std::to_string(model.max_batch_tokens()));
  }
  if (tokenizer.n_vocab() > hp.n_vocab) {
    throw Error("the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                " tokens but the model only " + std::to_string(hp.n_vocab));
  }
  if (opts.max_model_len > hp.n_ctx_train) {
    throw Error("max_model_len " + std::to_string(opts.max_model_len) +
                " exceeds the model's training context " + std::to_string(hp.n_ctx_train));
  }
  const int64_t pool_tokens = int64_t{kv_.n_blocks()} * kv_.block_size();
  max_model_len_ = static_cast<int32_t>(
      std::min<int64_t>(opts.max_model_len > 0 ? opts.max_model_len : hp.n_ctx_train, pool_tokens));
  if (max_model_len_ < 2) throw Error("engine: the KV pool holds fewer than 2 tokens");
  if (opts.kv_window > 0) {
    window_.emplace(opts.kv_window, opts.kv_sink, opts.block_size, opts.kv_heavy);
    // Cache positions never pass what one sequence's cache can hold; they must stay inside
    // the trained context, and one such sequence must fit in the pool.
    const int64_t cap = window_->max_cache_tokens(opts.max_batched_tokens);
    if (cap > hp.n_ctx_train) {
      throw Error("engine: kv_sink + kv_window + max_batched_tokens + a block = " +
                  std::to_string(cap) + " tokens exceed the model's training context " +
                  std::to_string(hp.n_ctx_train) + "; lower --kv-window");
    }
    if (cap > pool_tokens) {
      throw Error("engine: one sequence's window (" + std::to_string(cap) +
                  " tokens with a step and a block) does not fit the KV pool of " +
                  std::to_string(pool_tokens) + " tokens");
    }
  }
  fork_logits_.resize(static_cast<size_t>(hp.n_vocab));
  fork_row_.resize(static_cast<size_t>(hp.n_vocab));
  workspace_.reserve(hp.n_vocab);
  stats_.kv_blocks_total = kv_.n_blocks();
}

EngineCore::~EngineCore() = default;

void EngineCore::check_request(const Request& r) const {
  using Kind = RejectedRequest::Kind;
  const int32_t n_vocab = model_.hparams().n_vocab;
  if (r.prompt.empty()) throw RejectedRequest(Kind::Invalid, "the prompt is empty");
  for (int32_t id : r.prompt) {
    if (id < 0 || id >= n_vocab) {
      throw RejectedRequest(Kind::Invalid, "prompt token id " + std::to_string(id) +
                                               " is outside the vocabulary [0, " +
                                               std::to_string(n_vocab) + ")");
    }
  }
  if (auto err = r.params.validate(n_vocab)) throw RejectedRequest(Kind::Invalid, *err);
  if (r.n < 1 || r.n > Request::kMaxSamples) {
    throw RejectedRequest(Kind::Invalid, "n must be in [1, " +
                                             std::to_string(Request::kMaxSamples) + "], got " +
                                             std::to_string(r.n));
  }
  if (r.n > opts_.max_seqs) {
    throw RejectedRequest(Kind::Invalid, "n = " + std::to_string(r.n) +
                                             " samples exceed max_seqs " +
                                             std::to_string(opts_.max_seqs));
  }
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  if (window_) {
    // Any length: the window slides through a long prompt chunk by chunk.
    if (!opts_.chunked_prefill && prompt > opts_.max_batched_tokens) {
      throw RejectedRequest(Kind::TooLong, "the prompt has " + std::to_string(prompt) +
                                               " tokens; without chunked prefill at most " +
                                               std::to_string(opts_.max_batched_tokens) +
                                               " (max_batched_tokens) are accepted");
    }
    return;
  }
  if (prompt >= max_model_len_) {
    throw RejectedRequest(Kind::TooLong, "the prompt has " + std::to_string(prompt) +
                                             " tokens; the context holds " +
                                             std::to_string(max_model_len_) +
                                             " (prompt and at least one output token)");
  }
  if (r.params.max_tokens && prompt + *r.params.max_tokens > max_model_len_) {
    throw RejectedRequest(Kind::TooLong,
                          "prompt (" + std::to_string(prompt) + " tokens) + max_tokens (" +
                              std::to_string(*r.params.max_tokens) + ") exceeds the context of " +
                              std::to_string(max_model_len_) + " tokens");
  }
  if (!opts_.chunked_prefill && prompt > opts_.max_batched_tokens) {
    throw RejectedRequest(Kind::TooLong, "the prompt has " + std::to_string(prompt) +
                                             " tokens; without chunked prefill at most " +
                                             std::to_string(opts_.max_batched_tokens) +
                                             " (max_batched_tokens) are accepted");
  }
}

void EngineCore::add_request(uint64_t id, Request request, Clock::time_point arrival) {
  check_request(request);
  if (scheduler_.n_waiting() >= opts_.max_waiting) {
    throw RejectedRequest(RejectedRequest::Kind::QueueFull, "the queue is full (" +
                                                                std::to_string(opts_.max_waiting) +
                                                                " requests waiting); retry later");
  }
  if (requests_.count(id) != 0) {
    throw RejectedRequest(RejectedRequest::Kind::Invalid,
                          "request id " + std::to_string(id) + " is already in use");
  }
  auto req = std::make_unique<RequestState>();
  req->id = id;
  req->n = request.n;
  req->params = std::move(request.params);
  req->arrival = arrival;

  auto seq = std::make_unique<Sequence>();
  seq->request_id = id;
  seq->priority = request.priority;
  seq->arrival = next_arrival_++;
  seq->n_prompt = static_cast<int32_t>(request.prompt.size());
  seq->tokens = std::move(request.prompt);
  seq->forks_pending = request.n - 1;
  seq->sample = new_sample_state(*req, *seq, 0);
  scheduler_.add(seq.get());
  req->samples.push_back(std::move(seq));
  requests_.emplace(id, std::move(req));
}

std::unique_ptr<SampleState> EngineCore::new_sample_state(const RequestState& req,
                                                          const Sequence& seq,
                                                          int32_t index) const {
  // With a KV window the context does not run out: max_tokens as asked (the context's worth
  // when not given).
  const int32_t room = window_ ? max_model_len_ : max_model_len_ - seq.n_prompt;
  const int32_t max_tokens = window_ ? req.params.max_tokens.value_or(room)
                                     : std::min(req.params.max_tokens.value_or(room), room);
  auto st = std::make_unique<SampleState>(
      params_of_sample(req.params, index), model_.hparams().n_vocab,
      std::span(seq.tokens).first(seq.n_prompt), tokenizer_, max_tokens);
  st->metrics.prompt_tokens = seq.n_prompt;
  st->metrics.arrival = req.arrival;
  st->metrics.token_times.reserve(static_cast<size_t>(std::min(max_tokens, 4096)));
  return st;
}

void EngineCore::cancel(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const auto now = Clock::now();
  for (auto& seq : it->second->samples) {
    if (!seq->sample->finished) finish_sequence(*seq, FinishReason::Cancelled, now, pending_);
  }
  erase_finished_requests();
}

bool EngineCore::has_work() const {
  return scheduler_.n_running() + scheduler_.n_waiting() > 0 || !pending_.empty();
}

bool EngineCore::step(std::vector<RequestOutput>& out) {
  bool did = !pending_.empty();
  std::move(pending_.begin(), pending_.end(), std::back_inserter(out));
  pending_.clear();

  if (window_) {
    for (Sequence* seq : scheduler_.running()) {
      stats_.kv_window_dropped_tokens += window_->slide(*seq, blocks_, model_);
    }
  }
  const StepPlan& plan = scheduler_.schedule();
  if (plan.empty()) return did;
  const auto start = Clock::now();
  track_peak_usage(plan);
  try {
    runner_.execute(plan, kv_);
  } catch (const std::exception& e) {
    // A failed forward must not take the engine down: its sequences end with an error and
    // give their blocks back; everything else goes on.
    for (const ScheduledSeq& s : plan.seqs) {
      if (!s.seq->sample->finished) {
        finish_sequence(*s.seq, FinishReason::Error, Clock::now(), out, e.what());
      }
    }
    erase_finished_requests();
    return true;
  }
  process_step_results(plan, start, out);
  erase_finished_requests();
  ++stats_.steps;
  stats_.last_step_tokens = plan.n_tokens;
  stats_.last_step_seqs = static_cast<int32_t>(plan.seqs.size());
  return true;
}

void EngineCore::process_step_results(const StepPlan& plan, Clock::time_point start,
                                      std::vector<RequestOutput>& out) {
  const auto now = Clock::now();
  int32_t row = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    Sequence& seq = *s.seq;
    SampleMetrics& m = seq.sample->metrics;
    if (m.first_scheduled == Clock::time_point{}) m.first_scheduled = start;
    if (seq.uncomputed() > 1 || seq.n_computed < seq.n_prompt) {
      stats_.prompt_tokens_computed += s.n_tokens;
    }
    seq.n_computed += s.n_tokens;
    blocks_.trim_hot(seq);  // hot copies no later query reads go back now
    // Before sampling (which may finish seq) and forking (children share what is cached).
    blocks_.cache_full_blocks(seq);
    if (!s.sample) continue;
    std::span<float> logits = runner_.row(row++);
    RequestState& req = *requests_.at(seq.request_id);
    if (seq.forks_pending > 0) fork_samples(req, seq, logits, now, out);
    sample_and_append(seq, logits, now, out);
  }
}

void EngineCore::sample_and_append(Sequence& seq, std::span<float> logits, Clock::time_point now,
                                   std::vector<RequestOutput>& out) {
  SampleState& st = *seq.sample;
  const bool want_logprobs = st.params.logprobs.has_value();
  SampleLogprobs lp;
  const int32_t token = st.sampler.sample(logits, workspace_, want_logprobs ? &lp : nullptr);
  append_token(seq, token, want_logprobs ? &lp : nullptr, now, out);
}

void EngineCore::fork_samples(RequestState& req, Sequence& parent, std::span<const float> logits,
                              Clock::time_point now, std::vector<RequestOutput>& out) {
  // Every sample draws from the same logits: keep them before the parent's penalties.
  std::copy(logits.begin(), logits.end(), fork_logits_.begin());
  const std::span<float> row(fork_row_);
  const int32_t n_forks = parent.forks_pending;
  parent.forks_pending = 0;
  for (int32_t i = 1; i <= n_forks; ++i) {
    std::unique_ptr<Sequence> child = parent.fork(i);
    blocks_.share(parent, *child);
    child->sample = new_sample_state(req, *child, i);
    child->sample->metrics.first_scheduled = parent.sample->metrics.first_scheduled;
    scheduler_.add_forked(child.get());
    Sequence& c = *child;
    req.samples.push_back(std::move(child));
    std::copy(fork_logits_.begin(), fork_logits_.end(), row.begin());
    sample_and_append(c, row, now, out);
  }
}

void EngineCore::append_token(Sequence& seq, int32_t token, const SampleLogprobs* logprobs,
                              Clock::time_point now, std::vector<RequestOutput>& out) {
  SampleState& st = *seq.sample;
  st.sampler.accept(token);
  seq.tokens.push_back(token);
  SampleMetrics& m = st.metrics;
  if (m.output_tokens == 0) m.first_token = now;
  ++m.output_tokens;
  m.token_times.push_back(now);
  ++stats_.output_tokens;

  RequestOutput o;
  o.request_id = seq.request_id;
  o.index = seq.index;
  o.token_ids.push_back(token);
  if (logprobs) o.logprobs.push_back(*logprobs);
  o.time = now;

  const SamplingParams& p = st.params;
  const bool end_token =
      (!p.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  std::optional<FinishReason> finish;
  if (end_token) {
    finish = FinishReason::Stop;
  } else {
    auto checked = st.stops.push(st.detokenizer.push(token));
    o.text = std::move(checked.emit);
    if (checked.stopped) {
      finish = FinishReason::Stop;
    } else if (m.output_tokens >= st.max_tokens) {
      finish = FinishReason::Length;
    }
  }
  if (!finish) {
    out.push_back(std::move(o));
    return;
  }
  if (!st.stops.stopped()) {
    // Bytes the detokenizer held back may still complete a stop string.
    auto tail = st.stops.push(st.detokenizer.flush());
    o.text += tail.emit;
    if (tail.stopped) {
      finish = FinishReason::Stop;
    } else {
      o.text += st.stops.flush();
    }
  }
  close_sample(seq, *finish, now, o);
  out.push_back(std::move(o));
}

void EngineCore::finish_sequence(Sequence& seq, FinishReason reason, Clock::time_point now,
                                 std::vector<RequestOutput>& out, std::string error) {
  RequestOutput o;
  o.request_id = seq.request_id;
  o.index = seq.index;
  o.time = now;
  o.error = error;
  // Samples that were never forked off (the prompt did not finish) end with it.
  for (int32_t i = 1; i <= seq.forks_pending; ++i) {
    RequestOutput f;
    f.request_id = seq.request_id;
    f.index = i;
    f.time = now;
    f.finish = reason;
    f.error = error;
    SampleMetrics m;
    m.prompt_tokens = seq.n_prompt;
    m.arrival = seq.sample->metrics.arrival;
    m.finished = now;
    f.metrics = std::move(m);
    out.push_back(std::move(f));
    ++requests_.at(seq.request_id)->n_finished;
  }
  seq.forks_pending = 0;
  close_sample(seq, reason, now, o);
  out.push_back(std::move(o));
}

void EngineCore::close_sample(Sequence& seq, FinishReason reason, Clock::time_point now,
                              RequestOutput& last) {
  SampleState& st = *seq.sample;
  st.finished = true;
  st.metrics.finished = now;
  st.metrics.preemptions = seq.preemptions;
  st.metrics.cached_prompt_tokens = seq.cached_at_admission.value_or(0);
  last.finish = reason;
  last.metrics = st.metrics;
  scheduler_.finish(&seq);
  RequestState& req = *requests_.at(seq.request_id);
  if (++req.n_finished == req.n) finished_requests_.push_back(req.id);
}

void EngineCore::erase_finished_requests() {
  for (uint64_t id : finished_requests_) requests_.erase(id);
  finished_requests_.clear();
}

void EngineCore::track_peak_usage(const StepPlan& plan) {
  const BlockPool& pool = kv_.pool();
  // The last step at the peak: usage there is what the pool had to hold at its fullest.
  // Cached blocks no sequence uses are not counted: they are free on demand.
  const int32_t in_use = pool.n_used() - n_evictable();
  if (in_use < stats_.kv_blocks_peak) return;
  stats_.kv_blocks_peak = in_use;
  // Slots holding a token (after this step), a shared block's counted once across owners.
  const int32_t bs = kv_.block_size();
  double used = 0;
  for (const Sequence* seq : scheduler_.running()) {
    int64_t covered = seq->n_computed;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.seq == seq) covered += s.n_tokens;
    }
    for (size_t j = 0; j < seq->block_table.size(); ++j) {
      const int64_t in_block = std::clamp<int64_t>(covered - int64_t(j) * bs, 0, bs);
      const int32_t owners = block_state(seq->block_table[j]).owners;
      used += static_cast<double>(in_block) / std::max(owners, 1);
    }
  }
  stats_.kv_slots_used_at_peak = static_cast<int64_t>(used + 0.5);
  stats_.kv_slots_unused_at_peak = int64_t{in_use} * bs - stats_.kv_slots_used_at_peak;
}

int32_t EngineCore::n_evictable() const {
  const PrefixCache* cache = blocks_.prefix_cache();
  return cache ? cache->n_evictable() : 0;
}

void EngineCore::clear_prefix_cache() {
  blocks_.clear_prefix_cache();
}

void EngineCore::flush_host_tier() {
  if (KVTiers* tiers = blocks_.tiers()) tiers->flush_host();
}

BlockState EngineCore::block_state(int32_t block) const {
  const BlockPool& pool = kv_.pool();
  const int32_t refs = pool.ref_count(block);
  const PrefixCache* cache = blocks_.prefix_cache();
  const bool cached = cache != nullptr && cache->cached(block);
  return {.owners = refs - (cached ? 1 : 0), .cached = cached};
}

EngineStats EngineCore::stats() const {
  EngineStats s = stats_;
  s.running = static_cast<int32_t>(scheduler_.n_running());
  s.waiting = static_cast<int32_t>(scheduler_.n_waiting());
  s.kv_blocks_used = kv_.pool().n_used() - n_evictable();
  if (const PrefixCache* cache = blocks_.prefix_cache()) {
    s.kv_blocks_cached = cache->n_cached();
    s.kv_blocks_evictable = cache->n_evictable();
  }
  s.prefix_cache_queries = scheduler_.stats().prefix_queries;
  s.prefix_cache_hits = scheduler_.stats().prefix_hits;
  s.preemptions = scheduler_.stats().preemptions;
  s.swaps_out = scheduler_.stats().swaps_out;
  s.swaps_in = scheduler_.stats().swaps_in;
  s.swap_lost_tokens = scheduler_.stats().swap_lost_tokens;
  s.kv_swapped_bytes = blocks_.swapped_bytes();
  if (const KVTiers* tiers = blocks_.tiers()) s.kv_tiers = tiers->stats();
  return s;
}

}  // namespace tokamak
