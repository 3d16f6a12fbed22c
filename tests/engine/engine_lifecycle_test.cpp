// The threaded Engine: submissions from several threads at once, streamed outputs, cancel
// from another thread mid-generation (the samples end Cancelled, the blocks are freed),
// rejection at submit with a message that names the problem, a full queue, and shutdown with
// requests still running.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace tokamak {
namespace {

using test::greedy;
using test::make_request;

constexpr auto kTimeout = std::chrono::seconds(60);

// Reads `stream` until every sample has ended (or kTimeout passes: a failure).
void collect(RequestStream& stream, test::OutputLog& log) {
  const auto deadline = Clock::now() + kTimeout;
  while (!stream.done()) {
    if (auto o = stream.next_for(std::chrono::milliseconds(50))) {
      EXPECT_EQ(o->request_id, stream.id());
      log.absorb(*o);
    }
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "stream " << stream.id() << " did not end";
      return;
    }
  }
}

// Waits until the engine's snapshot shows no work and no blocks in use.
void expect_engine_drains(const Engine& engine) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  EngineStats st;
  while (Clock::now() < deadline) {
    st = engine.stats();
    if (st.kv_blocks_used == 0 && st.running == 0 && st.waiting == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "engine still holds " << st.kv_blocks_used << " blocks, " << st.running
                << " running, " << st.waiting << " waiting";
}

class EngineLifecycleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = test::load_synthetic(test::small_spec());
    SyntheticModelSpec long_ctx = test::small_spec();
    long_ctx.n_ctx = 4096;
    long_model_ = test::load_synthetic(long_ctx);
  }
  static void TearDownTestSuite() {
    model_.reset();
    long_model_.reset();
  }
  static std::vector<int32_t> prompt(uint64_t seed, int32_t n) {
    return test::random_prompt(seed, n, model_->tok->n_vocab());
  }

  static std::unique_ptr<test::TestModel> model_;
  static std::unique_ptr<test::TestModel> long_model_;  // room for thousands of tokens
};

std::unique_ptr<test::TestModel> EngineLifecycleTest::model_;
std::unique_ptr<test::TestModel> EngineLifecycleTest::long_model_;

TEST_F(EngineLifecycleTest, SubmitsFromSeveralThreadsEachGetTheirSoloOutput) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3;
  std::vector<Request> reqs;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    reqs.push_back(
        make_request(prompt(200 + i, 3 + 5 * i), greedy(8 + 2 * i), i % 4 == 1 ? 2 : 1, i % 3));
  }
  std::vector<test::SampleResult> solo;
  {
    EngineCore core(*model_->model, *model_->tok, test::roomy_options());
    for (const Request& r : reqs) solo.push_back(test::run_alone(core, r));
  }

  EngineOptions o = test::roomy_options();
  o.max_batched_tokens = 32;
  o.kv_budget = KVBudget::tokens(256);  // some preemption too
  Engine engine(*model_->model, *model_->tok, o);
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::vector<test::OutputLog> logs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (int k = 0; k < kPerThread; ++k) {
        const Request& r = reqs[size_t(t * kPerThread + k)];
        streams.push_back(engine.submit(r));
        logs[t].expect(streams.back()->id(), r);
        ids[t].push_back(streams.back()->id());
      }
      for (auto& s : streams) collect(*s, logs[t]);
    });
  }
  for (auto& th : threads) th.join();

  std::set<uint64_t> unique;
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kPerThread; ++k) {
      const uint64_t id = ids[t][k];
      EXPECT_TRUE(unique.insert(id).second) << "request id " << id << " given twice";
      const size_t i = size_t(t * kPerThread + k);
      for (int32_t s = 0; s < reqs[i].n; ++s) {
        const auto& got = logs[t].at(id, s);
        EXPECT_EQ(got.tokens, solo[i].tokens) << "request " << i << " sample " << s;
        EXPECT_EQ(got.text, solo[i].text);
        EXPECT_EQ(got.finish, FinishReason::Length);
      }
    }
  }
  expect_engine_drains(engine);
}

// A request that comes while a step runs waits for that step to end before the engine takes
// it in; its arrival (the start of its TTFT and queue time) must still be the submit() time.
// The step observer holds the engine thread inside a step until the second submit returned,
// so an arrival stamped at intake would come after `after` whatever the machine's speed.
TEST_F(EngineLifecycleTest, ArrivalIsTheSubmitTimeEvenWhenAStepIsRunning) {
  Engine engine(*model_->model, *model_->tok, test::roomy_options());
  std::mutex mu;
  std::condition_variable cv;
  bool in_step = false;
  bool submitted = false;
  engine.set_step_observer([&](const StepReport&) {
    std::unique_lock lock(mu);
    if (in_step) return;  // only the first step is held
    in_step = true;
    cv.notify_all();
    cv.wait(lock, [&] { return submitted; });
  });
  const Request first = make_request(prompt(400, 12), greedy(6));
  const Request second = make_request(prompt(401, 9), greedy(4));
  auto s1 = engine.submit(first);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kTimeout, [&] { return in_step; }));
  }
  const auto before = Clock::now();
  auto s2 = engine.submit(second);
  const auto after = Clock::now();
  {
    std::lock_guard lock(mu);
    submitted = true;
  }
  cv.notify_all();

  test::OutputLog log;
  log.expect(s1->id(), first);
  log.expect(s2->id(), second);
  collect(*s1, log);
  collect(*s2, log);
  const auto& m = log.at(s2->id(), 0).metrics;
  ASSERT_TRUE(m.has_value());
  EXPECT_GE(m->arrival, before);
  EXPECT_LE(m->arrival, after);
  EXPECT_GT(m->first_scheduled, after);  // taken in only once the held step ended
  expect_engine_drains(engine);
}

// The engine thread is held inside the stream's callback until another thread has asked to
// cancel: the cancel then lands mid-generation whatever the machine's speed.
TEST_F(EngineLifecycleTest, CancelFromAnotherThreadMidGeneration) {
  Engine engine(*long_model_->model, *long_model_->tok, test::roomy_options());
  const Request r = make_request(prompt(300, 10), greedy(4000), 2);
  auto stream = engine.submit(r);
  std::mutex mu;
  std::condition_variable cv;
  bool cancelled = false;
  stream->set_on_output([&] {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return cancelled; });
  });
  std::thread canceller([&] {
    test::OutputLog seen;
    seen.expect(stream->id(), r);
    // Wait for the first output, then cancel.
    auto first = stream->next_for(std::chrono::seconds(30));
    ASSERT_TRUE(first.has_value());
    engine.cancel(stream->id());
    {
      std::lock_guard lock(mu);
      cancelled = true;
    }
    cv.notify_all();
  });
  canceller.join();
  test::OutputLog log;
  log.expect(stream->id(), r);
  collect(*stream, log);
  for (int32_t i = 0; i < 2; ++i) {
    const auto& s = log.at(stream->id(), i);
    EXPECT_EQ(s.finish, FinishReason::Cancelled) << "sample " << i;
    EXPECT_LT(s.tokens.size(), 100u) << "the cancel came late";
  }
  expect_engine_drains(engine);
}

// A cancel that reaches the engine with the submission (or before it was scheduled) ends
// the request before it computes anything; unknown ids are ignored.
TEST_F(EngineLifecycleTest, CancelRightAfterSubmit) {
  Engine engine(*model_->model, *model_->tok, test::roomy_options());
  engine.cancel(987654);
  const Request r = make_request(prompt(350, 30), greedy(200), 3);
  auto stream = engine.submit(r);
  engine.cancel(stream->id());
  engine.cancel(stream->id());
  test::OutputLog log;
  log.expect(stream->id(), r);
  collect(*stream, log);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(log.at(stream->id(), i).finish, FinishReason::Cancelled) << "sample " << i;
  }
  EXPECT_LT(log.at(stream->id(), 0).tokens.size(), 200u);
  expect_engine_drains(engine);
  // The engine goes on serving.
  const Request next = make_request(prompt(351, 5), greedy(3));
  auto s2 = engine.submit(next);
  test::OutputLog log2;
  log2.expect(s2->id(), next);
  collect(*s2, log2);
  EXPECT_EQ(log2.at(s2->id(), 0).finish, FinishReason::Length);
}

TEST_F(EngineLifecycleTest, RejectsBadRequestsAtSubmitWithClearMessages) {
  EngineOptions o = test::roomy_options();
  o.max_model_len = 100;
  Engine engine(*model_->model, *model_->tok, o);
  EngineOptions nochunk = o;
  nochunk.chunked_prefill = false;
  nochunk.max_batched_tokens = 32;
  Engine strict(*model_->model, *model_->tok, nochunk);
  using Kind = RejectedRequest::Kind;
  auto expect_rejected = [](Engine& e, const Request& r, Kind kind, const std::string& words) {
    try {
      e.submit(r);
      ADD_FAILURE() << "accepted; expected a rejection saying \"" << words << "\"";
    } catch (const RejectedRequest& err) {
      EXPECT_EQ(err.kind(), kind) << err.what();
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << err.what();
    }
  };
  const Request ok = make_request(prompt(400, 10), greedy(5));

  expect_rejected(engine, make_request({}, greedy(5)), Kind::Invalid, "empty");
  auto bad_id = ok;
  bad_id.prompt[3] = 512;
  expect_rejected(engine, bad_id, Kind::Invalid, "512");
  bad_id.prompt[3] = -1;
  expect_rejected(engine, bad_id, Kind::Invalid, "-1");
  auto bad_p = ok;
  bad_p.params.top_p = 1.5f;
  expect_rejected(engine, bad_p, Kind::Invalid, "top_p");
  bad_p = ok;
  bad_p.params.temperature = -1.0f;
  expect_rejected(engine, bad_p, Kind::Invalid, "temperature");
  bad_p = ok;
  bad_p.params.max_tokens = 0;
  expect_rejected(engine, bad_p, Kind::Invalid, "max_tokens");
  bad_p = ok;
  bad_p.params.stop_token_ids = {9999};
  expect_rejected(engine, bad_p, Kind::Invalid, "9999");
  auto bad_n = ok;
  bad_n.n = 3;
  {
    EngineOptions two = o;
    two.max_seqs = 2;
    Engine small(*model_->model, *model_->tok, two);
    expect_rejected(small, bad_n, Kind::Invalid, "max_seqs");
  }
  bad_n.n = 0;
  expect_rejected(engine, bad_n, Kind::Invalid, "got 0");
  bad_n.n = Request::kMaxSamples + 1;
  expect_rejected(engine, bad_n, Kind::Invalid, std::to_string(Request::kMaxSamples + 1));
  // The context: prompt + max_tokens beyond max_model_len (100).
  expect_rejected(engine, make_request(prompt(401, 90), greedy(11)), Kind::TooLong, "100");
  expect_rejected(engine, make_request(prompt(402, 100), greedy(1)), Kind::TooLong, "100");
  // Without chunked prefill a prompt must fit one step.
  expect_rejected(strict, make_request(prompt(403, 33), greedy(1)), Kind::TooLong,
                  "max_batched_tokens");

  // Nothing was queued, and good requests still run, right at the limits.
  EXPECT_EQ(engine.stats().waiting, 0);
  for (Engine* e : {&engine, &strict}) {
    const Request at_limit = e == &engine
                                 ? make_request(prompt(404, 90), greedy(10), Request::kMaxSamples)
                                 : make_request(prompt(405, 32), greedy(3));
    auto stream = e->submit(at_limit);
    test::OutputLog log;
    log.expect(stream->id(), at_limit);
    collect(*stream, log);
    for (int32_t i = 0; i < at_limit.n; ++i) {
      EXPECT_EQ(log.at(stream->id(), i).finish, FinishReason::Length);
    }
    expect_engine_drains(*e);
  }
}

// With one running slot busy and max_waiting = 2, a third waiting request is refused: at
// submit (QueueFull) or, when the engine thread had already taken the others off the inbox,
// by its stream ending with an error that says so. Never queued beyond the limit.
TEST_F(EngineLifecycleTest, FullQueueRefusesRequests) {
  EngineOptions o = test::roomy_options();
  o.max_seqs = 1;
  o.max_waiting = 2;
  Engine engine(*long_model_->model, *long_model_->tok, o);
  const Request busy = make_request(prompt(500, 10), greedy(4000));
  auto running = engine.submit(busy);
  ASSERT_TRUE(running->next_for(std::chrono::seconds(30)).has_value()) << "it never started";
  std::vector<std::shared_ptr<RequestStream>> queued;
  queued.push_back(engine.submit(make_request(prompt(501, 10), greedy(5))));
  queued.push_back(engine.submit(make_request(prompt(502, 10), greedy(5))));
  int refused = 0;
  for (int i = 0; i < 2; ++i) {
    try {
      auto s = engine.submit(make_request(prompt(503, 10), greedy(5)));
      const auto o = s->next_for(std::chrono::seconds(30));
      ASSERT_TRUE(o.has_value());
      EXPECT_EQ(o->finish, FinishReason::Error) << "queued beyond max_waiting";
      EXPECT_NE(o->error.find("queue"), std::string::npos) << o->error;
      ++refused;
    } catch (const RejectedRequest& e) {
      EXPECT_EQ(e.kind(), RejectedRequest::Kind::QueueFull);
      EXPECT_NE(std::string(e.what()).find("queue is full"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 2);
  engine.cancel(running->id());
  for (auto& s : queued) {
    test::OutputLog log;
    log.expect(s->id(), make_request(prompt(501, 10), greedy(5)));
    collect(*s, log);
    EXPECT_EQ(log.at(s->id(), 0).finish, FinishReason::Length);
  }
  expect_engine_drains(engine);
}

TEST_F(EngineLifecycleTest, DestroyingTheEngineCancelsWhatIsLeft) {
  const Request r = make_request(prompt(600, 10), greedy(4000), 2);
  const Request waiting = make_request(prompt(601, 10), greedy(4000));
  std::shared_ptr<RequestStream> a, b;
  {
    EngineOptions o = test::roomy_options();
    o.max_seqs = 2;  // `waiting` waits for a slot
    Engine engine(*long_model_->model, *long_model_->tok, o);
    a = engine.submit(r);
    ASSERT_TRUE(a->next_for(std::chrono::seconds(30)).has_value());
    b = engine.submit(waiting);  // a's two samples run: b waits
  }
  test::OutputLog log;
  log.expect(a->id(), r);
  log.expect(b->id(), waiting);
  int32_t finals = 0;
  for (auto* s : {a.get(), b.get()}) {
    while (auto o = s->try_next()) {
      log.absorb(*o);
      finals += o->finish.has_value();
    }
    EXPECT_TRUE(s->done()) << "stream " << s->id() << " was left open";
  }
  EXPECT_EQ(finals, 3);
  EXPECT_EQ(log.at(b->id(), 0).finish, FinishReason::Cancelled);
  EXPECT_TRUE(log.at(b->id(), 0).tokens.empty());
  for (int32_t i = 0; i < 2; ++i) EXPECT_EQ(log.at(a->id(), i).finish, FinishReason::Cancelled);
}

}  // namespace
}  // namespace tokamak
