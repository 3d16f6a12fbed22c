// `tokamak bench serve` end to end against an in-process tokamak server on a tiny synthetic
// model (real sockets, HTTP, SSE, the engine), with its failure paths: a refused connection,
// HTTP errors and a server that stops mid-run. Also the flags and the URL.

#include "cli/bench_serve.h"

#include <gtest/gtest.h>

#include <thread>

#include "../engine/engine_test_util.h"
#include "cli/bench_serve_http.h"
#include "cli/bench_serve_metrics.h"
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

  std::unique_ptr<server::ApiServer> start_server() {
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
  const auto error_of = [](const FlagValues& f) -> std::string {
    try {
      serve_config_from_flags(f);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
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
