#include "server/api_server.h"

#include <algorithm>
#include <random>
#include <thread>

#include "format/gguf.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/generation_job.h"
#include "server/json_text.h"
#include "server/openai_request.h"
#include "server/web_assets.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {
namespace {

using nlohmann::json;

HttpResponse json_response(const json& body, int status = 200) {
  return {.status = status,
          .content_type = "application/json",
          .headers = {},
          .body = to_json_text(body)};
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The KV pool as at most kMaxCells characters: '.' free, 'c' cached (prefix cache, no
// sequence using it: free on demand), 'u' used, 's' shared (a cell is the busiest state of
// the blocks it stands for). `owners` as Engine::block_owners() gives it. blocks_used counts
// blocks held by requests, blocks_cached the cached ones no request holds.
json kv_map(const std::vector<uint8_t>& owners, int32_t block_size, const EngineGauges& g) {
  constexpr size_t kMaxCells = 4096;
  // Busier states rank higher: free < cached < used < shared.
  const auto rank = [](uint8_t o) {
    return o == Engine::kCachedBlock ? 1 : o == 0 ? 0 : o == 1 ? 2 : 3;
  };
  const size_t n = owners.size();
  const size_t per_cell = std::max<size_t>(1, (n + kMaxCells - 1) / kMaxCells);
  std::string cells;
  cells.reserve(n / per_cell + 1);
  int64_t used = 0, shared = 0, cached = 0;
  for (size_t start = 0; start < n; start += per_cell) {
    int most = 0;
    for (size_t b = start; b < std::min(n, start + per_cell); ++b) {
      most = std::max(most, rank(owners[b]));
    }
    cells.push_back(".cus"[most]);
  }
  for (uint8_t o : owners) {
    const int r = rank(o);
    cached += r == 1;
    used += r >= 2;
    shared += r == 3;
  }
  const double queries = static_cast<double>(g.prefix_cache_queries_total);
  return {{"blocks_total", n},
          {"blocks_used", used},
          {"blocks_shared", shared},
          {"blocks_cached", cached},
          {"usage", n ? static_cast<double>(used) / static_cast<double>(n) : 0.0},
          {"prefix_cache_hit_rate",
           queries > 0 ? static_cast<double>(g.prefix_cache_hits_total) / queries : 0.0},
          {"block_size", block_size},
          {"blocks_per_cell", per_cell},
          {"cells", std::move(cells)}};
}

// Compares without an early exit, so that the time taken does not tell how much of a key
// matched.
bool same_key(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

}  // namespace

struct ApiServer::Backend {
  ServedModel served;
  std::optional<ChatPrompter> chat;
  ModelContext context;
  std::unique_ptr<Engine> engine;
};

ApiServer::ApiServer(ApiServerOptions options)
    : opts_(std::move(options)),
      metrics_(opts_.model_id),
      started_(Clock::now()),
      created_unix_(unix_now()),
      id_state_(std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32)) {
  http_ = std::make_unique<HttpServer>(opts_.http, [this](int status, const std::string& message) {
    metrics_.count_error(status);
    return error_response(status, message);
  });
  pump_ = std::make_unique<OutputPump>();
  add_routes();
}

ApiServer::~ApiServer() {
  shutdown();
}

void ApiServer::start() {
  http_->start();
}

uint16_t ApiServer::port() const {
  return http_->port();
}

const Engine* ApiServer::engine() const {
  const Backend* b = ready_.load();
  return b ? b->engine.get() : nullptr;
}

ApiServer::Backend& ApiServer::backend() const {
  return *ready_.load();
}

void ApiServer::attach(ServedModel served) {
  if (backend_) throw Error("a model is already attached");
  auto b = std::make_unique<Backend>();
  b->served = std::move(served);
  b->chat = ChatPrompter::from_gguf(*b->served.file, *b->served.tokenizer);
  b->engine = std::make_unique<Engine>(*b->served.model, *b->served.tokenizer, b->served.engine);
  b->engine->set_step_observer(
      [this](const StepReport& step) { metrics_.observe_step(step.tokens, step.end); });
  b->context = {.tokenizer = b->served.tokenizer.get(),
                .chat = b->chat ? &*b->chat : nullptr,
                .model_id = opts_.model_id,
                .max_model_len = b->engine->core().max_model_len(),
                .sliding_window = b->engine->core().sliding_window()};
  backend_ = std::move(b);
  ready_.store(backend_.get());
}

void ApiServer::add_routes() {
  // Member handlers bound to this server.
  const auto bind = [this](void (ApiServer::*fn)(const HttpRequest&,
                                                 std::shared_ptr<ResponseWriter>)) -> Handler {
    return [this, fn](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
      (this->*fn)(req, std::move(w));
    };
  };
  const auto generation = [this](Endpoint endpoint) -> Handler {
    return [this, endpoint](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
      generate(endpoint, req, std::move(w));
    };
  };
  http_->route("GET", "/health", guarded(Access::Open, false, bind(&ApiServer::health)));
  http_->route("GET", "/v1/models", guarded(Access::ApiKey, false, bind(&ApiServer::models)));
  http_->route("POST", "/v1/completions",
               guarded(Access::ApiKey, true, generation(Endpoint::Completions)));
  http_->route("POST", "/v1/chat/completions",
               guarded(Access::ApiKey, true, generation(Endpoint::Chat)));
  http_->route("POST", "/tokenize", guarded(Access::ApiKey, true, bind(&ApiServer::tokenize)));
  http_->route("POST", "/detokenize", guarded(Access::ApiKey, true, bind(&ApiServer::detokenize)));
  http_->route("GET", "/metrics", guarded(Access::Open, false, bind(&ApiServer::metrics_text)));
  http_->route("GET", "/dashboard/data", guarded(Access::Open, false, bind(&ApiServer::dashboard)));
  for (const WebAsset& asset : web_assets()) {
    const Handler serve_asset = [&asset](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
      w->send({.status = 200,
               .content_type = std::string(asset.content_type),
               .headers = {{"Cache-Control", "no-cache"}},
               .body = std::string(asset.body)});
    };
    http_->route("GET", std::string(asset.path), serve_asset);
    if (asset.path == "/index.html") http_->route("GET", "/", serve_asset);
  }
}

bool ApiServer::authorized(const HttpRequest& req) const {
  if (opts_.api_keys.empty()) return true;
  const auto header = req.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (!header || !header->starts_with(kBearer)) return false;
  const std::string_view key = header->substr(kBearer.size());
  bool ok = false;
  for (const std::string& k : opts_.api_keys) ok |= same_key(key, k);
  return ok;
}

Handler ApiServer::guarded(Access access, bool needs_model, Handler handler) {
  return [this, access, needs_model, handler = std::move(handler)](
             const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    try {
      if (access == Access::ApiKey && !authorized(req)) {
        throw ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'", {},
                       "invalid_api_key");
      }
      if (needs_model && !ready_.load()) {
        throw ApiError(503, "the model is still loading; retry shortly", {}, "model_loading",
                       {{"Retry-After", "1"}});
      }
      if (needs_model && draining_.load()) {
        throw ApiError(503, "the server is shutting down", {}, "server_shutdown");
      }
      handler(req, w);
    } catch (const ApiError& e) {
      metrics_.count_error(e.status());
      w->send(error_response(e));
    } catch (const std::exception& e) {
      metrics_.count_error(500);
      w->send(error_response(ApiError(500, std::string("internal error: ") + e.what())));
    }
  };
}

EngineGauges ApiServer::gauges() const {
  EngineGauges g{};
  if (const Engine* engine = this->engine()) {
    const EngineStats s = engine->stats();
    g.running = s.running;
    g.waiting = s.waiting;
    g.kv_usage = s.kv_blocks_total ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0;
    g.preemptions_total = s.preemptions;
    g.swaps_out_total = s.swaps_out;
    g.swaps_in_total = s.swaps_in;
    g.swap_lost_tokens_total = s.swap_lost_tokens;
    g.prefix_cache_queries_total = s.prefix_cache_queries;
    g.prefix_cache_hits_total = s.prefix_cache_hits;
    g.kv_window_dropped_total = s.kv_window_dropped_tokens;
    const KVTierStats& t = s.kv_tiers;
    g.tier_host_hits_total = t.host_hits;
    g.tier_disk_hits_total = t.disk_hits;
    g.tier_host_stores_total = t.host_stores;
    g.tier_disk_stores_total = t.disk_stores;
    g.tier_host_evictions_total = t.host_evictions;
    g.tier_disk_evictions_total = t.disk_evictions;
    g.tier_disk_rejected_total = t.disk_rejected;
    g.tier_host_bytes = static_cast<double>(t.host_bytes);
    g.tier_disk_bytes = static_cast<double>(t.disk_bytes);
  }
  return g;
}

std::string ApiServer::new_id(const char* prefix) {
  uint64_t x;
  {
    std::lock_guard lock(id_mu_);
    // splitmix64: distinct, unpredictable-looking ids without a shared RNG's state races.
    x = (id_state_ += 0x9e3779b97f4a7c15ULL);
  }
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(x));
  return std::string(prefix) + hex;
}

void ApiServer::health(const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
  if (!ready_.load()) {
    w->send(json_response({{"status", "loading"}}, 503));
  } else if (draining_.load()) {
    w->send(json_response({{"status", "shutting down"}}, 503));
  } else {
    w->send(json_response({{"status", "ok"}}));
  }
}

void ApiServer::models(const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
  json model = {{"id", opts_.model_id},
                {"object", "model"},
                {"created", created_unix_},
                {"owned_by", "tokamak"}};
  if (const Backend* b = ready_.load()) model["max_model_len"] = b->context.max_model_len;
  w->send(json_response({{"object", "list"}, {"data", json::array({std::move(model)})}}));
}

void ApiServer::generate(Endpoint endpoint, const HttpRequest& req,
                         std::shared_ptr<ResponseWriter> w) {
  Backend& b = backend();
  const json body = parse_json_object(req.body);
  GenerationRequest request = endpoint == Endpoint::Chat
                                  ? parse_chat_request(body, b.context)
                                  : parse_completion_request(body, b.context);
  ResponseIdentity identity{.id = new_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-"),
                            .created = unix_now(),
                            .model = opts_.model_id};
  auto job =
      std::make_shared<GenerationJob>(std::move(request), std::move(identity), w,
                                      GenerationJob::Context{.engine = b.engine.get(),
                                                             .pump = pump_.get(),
                                                             .metrics = &metrics_,
                                                             .tokenizer = b.served.tokenizer.get()},
                                      nullptr);
  {
    std::lock_guard lock(jobs_mu_);
    jobs_.insert(job);
  }
  job->set_on_done([this, weak = std::weak_ptr<GenerationJob>(job)] {
    std::lock_guard lock(jobs_mu_);
    if (auto j = weak.lock()) jobs_.erase(j);
    jobs_cv_.notify_all();
  });
  try {
    job->start();
  } catch (...) {
    std::lock_guard lock(jobs_mu_);
    jobs_.erase(job);
    throw;
  }
}

void ApiServer::tokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const Backend& b = backend();
  const auto tokens = parse_tokenize_request(parse_json_object(req.body), b.context);
  w->send(json_response(
      {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", b.context.max_model_len}}));
}

void ApiServer::detokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const Backend& b = backend();
  const auto tokens = parse_detokenize_request(parse_json_object(req.body), b.context);
  w->send(json_response({{"prompt", b.served.tokenizer->decode(tokens)}}));
}

void ApiServer::metrics_text(const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
  w->send({.status = 200,
           .content_type = "text/plain; version=0.0.4; charset=utf-8",
           .headers = {},
           .body = metrics_.prometheus_text(gauges())});
}

void ApiServer::dashboard(const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
  const EngineGauges g = gauges();
  json data = metrics_.dashboard(g, Clock::now());
  if (const Backend* b = ready_.load()) {
    data["kv"] = kv_map(b->engine->block_owners(), b->served.engine.block_size, g);
  } else {
    data["kv"] = kv_map({}, 0, g);
  }
  w->send(json_response(data));
}

void ApiServer::shutdown() {
  {
    std::lock_guard lock(jobs_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  draining_.store(true);
  http_->stop_accepting();
  std::vector<std::shared_ptr<GenerationJob>> left;
  {
    std::unique_lock lock(jobs_mu_);
    jobs_cv_.wait_for(lock, opts_.shutdown_timeout, [&] { return jobs_.empty(); });
    left.assign(jobs_.begin(), jobs_.end());
  }
  for (const auto& job : left) job->abort("the server is shutting down");
  {
    // The engine ends the aborted requests at its next step; their jobs then finish.
    std::unique_lock lock(jobs_mu_);
    jobs_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return jobs_.empty(); });
  }
  // Let the I/O threads put the last bytes on the wire before the connections close.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  http_->stop();
  // The engine thread signals the pump: stop the engine first.
  if (backend_) backend_->engine.reset();
  ready_.store(nullptr);
  pump_.reset();
  std::lock_guard lock(jobs_mu_);
  jobs_.clear();
}

}  // namespace tokamak::server
