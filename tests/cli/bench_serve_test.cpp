// `tokamak bench serve` end to end against an in-process tokamak server on a tiny synthetic
// model (real sockets, HTTP, SSE, the engine), with its failure paths: a refused connection,
// HTTP errors and a server that stops mid-run. Also the flags and the URL.

#include "cli/bench_serve.h"

#include <gtest/gtest.h>

#include <thread>

#include "../engine/engine_test_util.h"
#include "cli/bench_serve_http.h"
#include "cli/bench_serve_metrics.h"
#include "cli/bench_serve_turns.h"
#include "core/error.h"
#include "server/api_server.h"

namespace tokamak::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class BenchServeEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelSpec spec = test::small_spec();
    spec.n_ctx = 1024;
    SyntheticModel synthetic = make_synthetic_model(spec);
    // A ChatML-like template, so that /v1/chat/completions works too.
    synthetic.set("tokenizer.chat_template",
                  gguf::Value::string("{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] "
                                      "}}</s>\n{% endfor %}<s>assistant\n"));
    model_ = test::load_model(synthetic);
    bench_tok_ = Tokenizer::from_gguf(*model_->gguf);
  }

  std::unique_ptr<server::ApiServer> start_server(bool prefix_caching = true) {
    server::ApiServerOptions opts;
    opts.http.port = 0;
    opts.model_id = "tiny";
    opts.shutdown_timeout = 2s;
    auto s = std::make_unique<server::ApiServer>(opts);
    s->start();
    server::ServedModel served;
    served.file = model_->gguf;
    served.model = std::move(model_->model);
    served.tokenizer = std::move(model_->tok);
    served.engine.kv_budget = KVBudget::tokens(8192);
    served.engine.prefix_caching = prefix_caching;
    s->attach(std::move(served));
    return s;
  }

  static ServeBenchConfig config(uint16_t port, int32_t n) {
    ServeBenchConfig c;
    c.url = "http://127.0.0.1:" + std::to_string(port);
    c.dataset.num_prompts = n;
    c.dataset.input_len = 24;
    c.dataset.output_len = 8;
    c.dataset.seed = 3;
    c.timeout_s = 30;
    return c;
  }

  std::unique_ptr<test::TestModel> model_;
  std::unique_ptr<Tokenizer> bench_tok_;
};

TEST_F(BenchServeEndToEndTest, SweepAgainstTokamak) {
  auto server = start_server();
  ServeBenchConfig c = config(server->port(), 6);
  c.sweep = {1, 3};
  c.slo_ttft_ms = 60000;
  c.warmup = 2;
  const std::vector<json> runs = serve_bench_runs(c, *bench_tok_);
  ASSERT_EQ(runs.size(), 2u);
  for (size_t k = 0; k < runs.size(); ++k) {
    const json& run = runs[k];
    EXPECT_EQ(run["label"], "tiny");  // the first model of /v1/models
    EXPECT_EQ(run["settings"]["model"], "tiny");
    EXPECT_EQ(run["settings"]["max_concurrency"], c.sweep[k]);
    EXPECT_EQ(run["completed"], 6) << run["errors"].dump();
    EXPECT_EQ(run["failed"], 0);
    EXPECT_EQ(run["peak_concurrency"], c.sweep[k]);
    EXPECT_EQ(run["output_tokens"], 6 * 8);
    EXPECT_EQ(run["prompt_tokens"], 6 * 24);  // the server's count: the prompts are exact
    EXPECT_EQ(run["usage_missing"], 0);
    EXPECT_EQ(run["output_len_mismatches"], 0);
    EXPECT_EQ(run["slo_met"], 6);
    EXPECT_GT(run["output_tokens_per_s"].get<double>(), 0);
    const json& req = run["requests"];
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(req["prompt_tokens"][i], 24);
      EXPECT_EQ(req["output_tokens"][i], 8);
      EXPECT_LE(req["ttft_ms"][i].get<double>(), req["e2e_ms"][i].get<double>());
      EXPECT_GE(req["itl_ms"][i].size(), 1u);
    }
  }
  EXPECT_EQ(format_runs_table(runs).find("label"), std::string::npos);
}

TEST_F(BenchServeEndToEndTest, ChatEndpointAndPrefixSharedPrompts) {
  auto server = start_server();
  ServeBenchConfig c = config(server->port(), 4);
  c.endpoint = ApiEndpoint::Chat;
  c.model = "tiny";
  c.label = "mine";
  c.dataset.kind = DatasetKind::PrefixShared;
  c.dataset.prefix_groups = 2;
  c.dataset.prefix_len = 40;
  c.request_rate = 50;
  const std::vector<json> runs = serve_bench_runs(c, *bench_tok_);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["label"], "mine");
  EXPECT_EQ(runs[0]["completed"], 4) << runs[0]["errors"].dump();
  EXPECT_EQ(runs[0]["output_tokens"], 4 * 8);
  EXPECT_EQ(runs[0]["settings"]["request_rate"], 50.0);
  // The chat template wraps the 40 + 24 tokens of system and user text.
  EXPECT_GT(runs[0]["requests"]["prompt_tokens"][0].get<int>(), 64);
}

TEST_F(BenchServeEndToEndTest, HttpErrorsFailTheirRequests) {
  auto server = start_server();
  ServeBenchConfig c = config(server->port(), 3);
  c.model = "no-such-model";
  const json run = serve_bench_runs(c, *bench_tok_).at(0);
  EXPECT_EQ(run["completed"], 0);
  EXPECT_EQ(run["failed"], 3);
  ASSERT_EQ(run["errors"].size(), 1u);
  EXPECT_EQ(run["errors"][0]["count"], 3);
  EXPECT_EQ(run["errors"][0]["message"].get<std::string>().rfind("HTTP 400: ", 0), 0u)
      << run["errors"];
}

TEST_F(BenchServeEndToEndTest, RefusedConnectionsAreFailuresWithTheReason) {
  uint16_t port = 0;
  {  // a port that was just free: nothing listens there now
    server::ApiServerOptions opts;
    opts.http.port = 0;
    auto s = std::make_unique<server::ApiServer>(opts);
    s->start();
    port = s->port();
    s->shutdown();
  }
  ServeBenchConfig c = config(port, 3);
  EXPECT_THROW(serve_bench_runs(c, *bench_tok_), Error);  // no --model: /v1/models is needed
  c.model = "tiny";
  const json run = serve_bench_runs(c, *bench_tok_).at(0);
  EXPECT_EQ(run["failed"], 3);
  EXPECT_NE(run["errors"][0]["message"].get<std::string>().find("Connection refused"),
            std::string::npos)
      << run["errors"];
  EXPECT_NE(format_run(run).find("3 x connect to"), std::string::npos);
}

TEST_F(BenchServeEndToEndTest, ServerStoppingMidRunEndsTheRunWithFailures) {
  auto server = start_server();
  ServeBenchConfig c = config(server->port(), 20);
  c.model = "tiny";
  c.request_rate = 10;  // arrivals over ~2 s
  std::vector<json> runs;
  std::thread bench([&] { runs = serve_bench_runs(c, *bench_tok_); });
  std::this_thread::sleep_for(300ms);
  server->shutdown();
  bench.join();
  ASSERT_EQ(runs.size(), 1u);
  const json& run = runs[0];
  EXPECT_EQ(run["completed"].get<int>() + run["failed"].get<int>(), 20);
  EXPECT_GT(run["failed"].get<int>(), 0);
  EXPECT_FALSE(run["errors"].empty());
}

// --dataset multiturn: conversations sent turn by turn, each turn after the previous reply,
// with the whole history; per-turn figures from the server's cached-token counts.
TEST_F(BenchServeEndToEndTest, MultiTurnConversationsAgainstTokamak) {
  auto server = start_server();
  ServeBenchConfig c = config(server->port(), 1);
  c.endpoint = ApiEndpoint::Chat;
  c.dataset.kind = DatasetKind::MultiTurn;
  c.dataset.num_prompts.reset();
  c.dataset.conversations = 3;
  c.dataset.turns = 4;
  c.dataset.input_len = 20;
  c.dataset.output_len = 6;
  c.max_concurrency = 2;
  const std::vector<json> runs = serve_bench_runs(c, *bench_tok_);
  ASSERT_EQ(runs.size(), 1u);
  const json& run = runs[0];
  EXPECT_EQ(run["completed"], 12) << run["errors"].dump();
  EXPECT_EQ(run["output_tokens"], 12 * 6);
  EXPECT_EQ(run["output_len_mismatches"], 0);
  EXPECT_EQ(run["peak_concurrency"], 2);  // conversations in flight
  EXPECT_EQ(run["settings"]["dataset"], "multiturn");
  EXPECT_EQ(run["settings"]["num_prompts"], 12);
  EXPECT_EQ(run["settings"]["turns"], 4);

  // Per conversation: turn k + 1 is sent after turn k's reply ended, and its prompt holds
  // turn k's prompt, reply and a new message.
  const json& req = run["requests"];
  ASSERT_EQ(req["turn"].size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(req["conversation"][i], i / 4);
    EXPECT_EQ(req["turn"][i], i % 4 + 1);
    ASSERT_TRUE(req["cached_tokens"][i].is_number()) << "tokamak reports cached tokens";
    if (i % 4 == 0) continue;
    EXPECT_GE(req["start_ms"][i].get<double>(),
              req["start_ms"][i - 1].get<double>() + req["e2e_ms"][i - 1].get<double>() - 1e-6);
    EXPECT_GT(req["prompt_tokens"][i].get<int>(), req["prompt_tokens"][i - 1].get<int>() + 20);
    // Everything of the previous turn's prompt, in whole blocks, at most, came from the cache.
    EXPECT_GT(req["cached_tokens"][i].get<int>(), 0) << i;
    EXPECT_LE(req["cached_tokens"][i].get<int>(), req["prompt_tokens"][i - 1].get<int>() + 6);
  }

  const json& turns = run["turns"];
  ASSERT_EQ(turns.size(), 4u);
  double last_prompt = 0;
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(turns[t]["turn"], t + 1);
    EXPECT_EQ(turns[t]["completed"], 3);
    EXPECT_EQ(turns[t]["failed"], 0);
    EXPECT_EQ(turns[t]["ttft_ms"]["count"], 3);
    EXPECT_GT(turns[t]["prompt_tokens_mean"].get<double>(), last_prompt);
    last_prompt = turns[t]["prompt_tokens_mean"].get<double>();
    ASSERT_TRUE(turns[t]["prefix_hit_rate"].is_number());
    if (t > 0) {
      EXPECT_GT(turns[t]["prefix_hit_rate"].get<double>(), 0) << t;
    }
  }
  // By the last turn most of the prompt is history.
  EXPECT_GT(turns[3]["prefix_hit_rate"].get<double>(), 0.4);
  EXPECT_TRUE(run["prefix_hit_rate"].is_number());
  const std::string table = format_turns(run);
  EXPECT_NE(table.find("hit rate"), std::string::npos);
  EXPECT_NE(format_run(run).find("multiturn, 3 conversations x 4 turns"), std::string::npos)
      << format_run(run);
}

// With the server's prefix cache off the hit rate is known and 0, not unknown.
TEST_F(BenchServeEndToEndTest, MultiTurnWithoutAPrefixCacheReportsZeroHits) {
  auto server = start_server(/*prefix_caching=*/false);
  ServeBenchConfig c = config(server->port(), 1);
  c.endpoint = ApiEndpoint::Chat;
  c.dataset.kind = DatasetKind::MultiTurn;
  c.dataset.num_prompts.reset();
  c.dataset.conversations = 2;
  c.dataset.turns = 2;
  const json run = serve_bench_runs(c, *bench_tok_).at(0);
  EXPECT_EQ(run["completed"], 4) << run["errors"].dump();
  for (const json& t : run["turns"]) EXPECT_EQ(t["prefix_hit_rate"], 0.0);
  EXPECT_EQ(run["cached_tokens"], 0);
}

// A failed turn ends its conversation: later turns cannot be made without its reply.
TEST_F(BenchServeEndToEndTest, MultiTurnFailureEndsTheConversation) {
  auto server = start_server();
  ServeBenchConfig c = config(server->port(), 1);
  c.model = "no-such-model";
  c.endpoint = ApiEndpoint::Chat;
  c.dataset.kind = DatasetKind::MultiTurn;
  c.dataset.num_prompts.reset();
  c.dataset.conversations = 2;
  c.dataset.turns = 3;
  const json run = serve_bench_runs(c, *bench_tok_).at(0);
  EXPECT_EQ(run["failed"], 2);
  EXPECT_EQ(run["completed"], 0);
  EXPECT_EQ(run["turns"][0]["failed"], 2);
  EXPECT_EQ(run["turns"][1]["failed"], 0);
  EXPECT_EQ(run["turns"][1]["completed"], 0);
  EXPECT_TRUE(run["turns"][0]["prefix_hit_rate"].is_null());
}

// run_chains: a chain's next body is asked for only once its previous request completed,
// with every earlier record; at most max_concurrency chains run at once.
TEST_F(BenchServeEndToEndTest, ChainsSendEachRequestAfterThePreviousReply) {
  auto server = start_server();
  ClientOptions client;
  client.url = parse_url("http://127.0.0.1:" + std::to_string(server->port()));
  client.timeout = 30s;
  ChainPlan plan;
  plan.target = "/v1/completions";
  plan.arrival_s.assign(3, 0.0);
  plan.max_concurrency = 2;
  std::vector<std::vector<std::string>> seen(3);  // the replies each call was given
  std::vector<size_t> calls(3, 0);
  plan.next = [&](size_t c, std::span<const RequestRecord> done) -> std::optional<std::string> {
    EXPECT_EQ(done.size(), calls[c]++) << "chain " << c << " skipped or repeated a step";
    for (const RequestRecord& r : done) EXPECT_TRUE(r.ok()) << *r.failure;
    if (!done.empty()) {
      EXPECT_LE(done.back().ended, BenchClock::now());
      seen[c].push_back(done.back().trace.text);
    }
    if (done.size() == 3) return std::nullopt;
    return json{{"model", "tiny"},
                {"prompt", "chain " + std::to_string(c)},
                {"max_tokens", 3},
                {"ignore_eos", true},
                {"stream", true}}
        .dump();
  };
  const ChainResult result = run_chains(client, plan);
  EXPECT_EQ(calls, std::vector<size_t>(3, 4));  // 3 requests, then the end of each chain
  EXPECT_EQ(result.peak_in_flight, 2);
  ASSERT_EQ(result.chains.size(), 3u);
  for (size_t c = 0; c < 3; ++c) {
    ASSERT_EQ(result.chains[c].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(result.chains[c][k].ok());
      EXPECT_EQ(seen[c][k], result.chains[c][k].trace.text);
      if (k > 0) {
        EXPECT_GE(result.chains[c][k].sent, result.chains[c][k - 1].ended);
      }
    }
  }
}

// The one-line message serve_config_from_flags gives for f, or "no error".
std::string error_of(const FlagValues& f) {
  try {
    serve_config_from_flags(f);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(BenchServeFlagsTest, MultiTurn) {
  const ServeBenchConfig c = serve_config_from_flags(
      {{"dataset", "multiturn"}, {"turns", "5"}, {"conversations", "3"}, {"system-len", "40"}});
  EXPECT_EQ(c.dataset.kind, DatasetKind::MultiTurn);
  EXPECT_EQ(c.endpoint, ApiEndpoint::Chat);  // chat without being asked
  EXPECT_EQ(c.dataset.turns, 5);
  EXPECT_EQ(c.dataset.conversations, 3);
  EXPECT_EQ(c.dataset.system_len, 40);
  const ServeBenchConfig d = serve_config_from_flags({{"dataset", "multiturn"}});
  EXPECT_EQ(d.dataset.turns, 10);
  EXPECT_EQ(d.dataset.system_len, 0);
  EXPECT_EQ(error_of({{"dataset", "multiturn"}, {"endpoint", "completions"}}),
            "--dataset multiturn sends chat histories: use --endpoint chat");
  EXPECT_EQ(error_of({{"dataset", "multiturn"}, {"num-prompts", "8"}}),
            "--dataset multiturn sends --conversations x --turns requests: drop --num-prompts");
  EXPECT_EQ(error_of({{"turns", "0"}}), "--turns must be at least 1");
  EXPECT_EQ(error_of({{"system-len", "-1"}}), "--system-len must be at least 0");
}

TEST(BenchServeFlagsTest, DefaultsAndValues) {
  const ServeBenchConfig d = serve_config_from_flags({});
  EXPECT_EQ(d.url, "http://127.0.0.1:8080");
  EXPECT_EQ(d.endpoint, ApiEndpoint::Completions);
  EXPECT_EQ(d.dataset.kind, DatasetKind::Random);
  EXPECT_FALSE(d.request_rate);
  EXPECT_FALSE(d.max_concurrency);
  const ServeBenchConfig c = serve_config_from_flags({{"endpoint", "chat"},
                                                      {"dataset", "prefix-shared"},
                                                      {"request-rate", "2.5"},
                                                      {"sweep-concurrency", "1,4,16"},
                                                      {"range-ratio", "0.2"},
                                                      {"slo-ttft-ms", "500"}});
  EXPECT_EQ(c.endpoint, ApiEndpoint::Chat);
  EXPECT_EQ(c.dataset.kind, DatasetKind::PrefixShared);
  EXPECT_EQ(c.request_rate, 2.5);
  EXPECT_EQ(c.sweep, (std::vector<int32_t>{1, 4, 16}));
  EXPECT_DOUBLE_EQ(c.dataset.range_ratio, 0.2);
  EXPECT_EQ(c.slo_ttft_ms, 500);
}

TEST(BenchServeFlagsTest, BadValuesAreOneLineErrors) {
  EXPECT_EQ(error_of({{"num-prompts", "x"}}), "--num-prompts x: expected an integer");
  EXPECT_EQ(error_of({{"num-prompts", "0"}}), "--num-prompts must be at least 1");
  EXPECT_EQ(error_of({{"request-rate", "0"}}), "--request-rate must be positive, or inf");
  EXPECT_EQ(error_of({{"range-ratio", "1"}}), "--range-ratio must be in [0, 1)");
  EXPECT_EQ(error_of({{"sweep-concurrency", "1,,4"}}),
            "--sweep-concurrency 1,,4: expected positive integers separated by commas, e.g. "
            "1,4,16,32");
  EXPECT_EQ(error_of({{"endpoint", "embeddings"}}),
            "--endpoint must be completions or chat, not \"embeddings\"");
  EXPECT_EQ(error_of({{"url", "localhost:8080"}}),
            "--url \"localhost:8080\": expected http://HOST[:PORT][/PATH]");
  EXPECT_EQ(error_of({{"json", "/nonexistent/dir/x.json"}}),
            "--json /nonexistent/dir/x.json: the folder /nonexistent/dir does not exist");
  EXPECT_EQ(error_of({{"max-concurrency", "4"}, {"sweep-concurrency", "1,2"}}),
            "--sweep-concurrency sets the concurrency of each run: drop --max-concurrency");
}

TEST(BenchServeUrlTest, Forms) {
  ServerUrl u = parse_url("http://example.com");
  EXPECT_EQ(u.host, "example.com");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.prefix, "");
  u = parse_url("http://127.0.0.1:8080/v1/");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.prefix, "");  // the routes add /v1
  u = parse_url("http://[::1]:9000/api");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.prefix, "/api");
  EXPECT_EQ(u.origin(), "http://[::1]:9000");
  for (const char* bad : {"https://x", "http://", "http://:80", "http://h:0", "http://h:x",
                          "http://h:80?q=1", "ftp://h"}) {
    EXPECT_THROW(parse_url(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace tokamak::cli
