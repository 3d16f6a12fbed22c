#pragma once
// ApiServer: `tokamak serve`'s application. It routes HTTP requests (http_server.h) to the
// engine and answers in OpenAI's shapes:
//
//   GET  /health                 503 until a model is attached, then 200
//   GET  /v1/models              the served model
//   POST /v1/completions         text completions, whole or streamed (SSE)
//   POST /v1/chat/completions    chat completions, whole or streamed (SSE)
//   POST /tokenize, /detokenize  the model's tokenizer
//   GET  /metrics                Prometheus text (tokamak:*)
//   GET  /dashboard/data         the web page's live numbers and KV block map
//   GET  /, /app.js, /style.css  the web page (embedded)
//
// The server listens before the model is loaded (start(), then attach()), so that a client
// or an orchestrator sees it coming up. shutdown() stops it gracefully.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/engine.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/output_pump.h"

namespace tokamak {
namespace gguf {
class File;
}
class Model;
class Tokenizer;
}  // namespace tokamak

namespace tokamak::server {

struct ApiServerOptions {
  HttpServerOptions http;
  std::string model_id;               // the name in /v1/models and "model"
  std::vector<std::string> api_keys;  // empty: no authentication
  std::chrono::milliseconds shutdown_timeout{30000};
};

// The loaded model that attach() serves: the file the weights are mapped from, the model,
// its tokenizer, and how to run the engine over them.
struct ServedModel {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  EngineOptions engine;
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and listens (throws Error when the address is unusable). Until attach(), /health
  // and the model routes answer 503.
  void start();
  uint16_t port() const;

  // Starts the engine over the model and opens the model routes. Throws Error when the
  // engine cannot be built (e.g. the KV budget buys no block). Once only.
  void attach(ServedModel served);
  // The engine's start-up description (for the log), once attached.
  const Engine* engine() const;

  // Graceful stop: stop accepting, answer new requests 503, let in-flight ones finish for up
  // to shutdown_timeout, end the rest with an error, close every connection. Idempotent.
  void shutdown();

 private:
  struct Backend;

  void add_routes();
  // Handlers. Each runs on an HTTP thread and either answers or hands the writer on.
  void health(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void models(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void generate(Endpoint endpoint, const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void tokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void detokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void metrics_text(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void dashboard(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);

  // Wraps a handler: API key check, 503 when no model, ApiError / exceptions -> error
  // responses (counted in the metrics).
  enum class Access { Open, ApiKey };
  Handler guarded(Access access, bool needs_model, Handler handler);
  bool authorized(const HttpRequest& req) const;
  Backend& backend() const;
  EngineGauges gauges() const;
  std::string new_id(const char* prefix);

  ApiServerOptions opts_;
  ServerMetrics metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<OutputPump> pump_;
  std::unique_ptr<Backend> backend_;  // set once by attach()
  std::atomic<Backend*> ready_{nullptr};
  std::atomic<bool> draining_{false};
  Clock::time_point started_;
  int64_t created_unix_ = 0;

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::unordered_set<std::shared_ptr<class GenerationJob>> jobs_;  // in flight
  std::mutex id_mu_;
  uint64_t id_state_;
  bool shut_down_ = false;
};

}  // namespace tokamak::server
