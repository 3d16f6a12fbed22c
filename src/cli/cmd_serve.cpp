// tokamak serve: the OpenAI-compatible HTTP server over the serving engine.
//
// Order of start-up: bind and print the URL first, then load the model (/health answers 503
// meanwhile), then serve until SIGINT/SIGTERM, which stops gracefully (see
// ApiServer::shutdown) and exits 0.

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/engine_flags.h"
#include "cli/loaded_model.h"
#include "core/error.h"
#include "server/api_server.h"

namespace tokamak::cli {
namespace {

struct ServeConfig {
  std::string model;
  int threads = 0;
  std::string affinity = "none";  // --affinity (core/cpu_affinity.h)
  std::string host = "127.0.0.1";
  int port = 8080;
  int io_threads = 2;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  size_t max_queue = 4096;
  double shutdown_timeout_s = 30;
  std::string cors_origin;
  std::string served_model_name;
  size_t max_body_bytes = 16 * 1024 * 1024;
  double read_timeout_s = 30;
  double idle_timeout_s = 60;
  EngineFlags engine;
};

std::chrono::milliseconds seconds_flag(double s, const char* flag) {
  if (!(s > 0) || s > 86400) {
    throw Error(std::string(flag) + " must be in (0, 86400] seconds");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// One key per line; blank lines and lines starting with '#' are skipped.
std::vector<std::string> read_api_keys(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("--api-key-file: cannot read " + path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    keys.push_back(line.substr(start));
  }
  if (keys.empty()) throw Error("--api-key-file: " + path + " holds no key");
  return keys;
}

server::ApiServerOptions server_options(const ServeConfig& c, const std::string& model_path) {
  server::ApiServerOptions o;
  if (c.port < 0 || c.port > 65535) throw Error("--port must be in [0, 65535]");
  o.http.host = c.host;
  o.http.port = static_cast<uint16_t>(c.port);
  if (c.io_threads < 1 || c.io_threads > 64) throw Error("--io-threads must be in [1, 64]");
  o.http.io_threads = c.io_threads;
  if (c.max_body_bytes < 1024) throw Error("--max-body-bytes must be at least 1024");
  o.http.max_body_bytes = c.max_body_bytes;
  o.http.read_timeout = seconds_flag(c.read_timeout_s, "--read-timeout");
  o.http.idle_timeout = seconds_flag(c.idle_timeout_s, "--idle-timeout");
  o.http.cors_allow_origin = c.cors_origin;
  o.shutdown_timeout = seconds_flag(c.shutdown_timeout_s, "--shutdown-timeout");
  o.api_keys = c.api_keys;
  if (!c.api_key_file.empty()) {
    for (auto& k : read_api_keys(c.api_key_file)) o.api_keys.push_back(std::move(k));
  }
  for (const auto& k : o.api_keys) {
    if (k.empty()) throw Error("--api-key must not be empty");
  }
  o.model_id = c.served_model_name;
  if (o.model_id.empty()) o.model_id = std::filesystem::path(model_path).stem().string();
  return o;
}

void run_serve(const ServeConfig& c) {
  EngineOptions engine_opts = c.engine.engine_options();
  if (c.max_queue < 1) throw Error("--max-queue must be at least 1");
  engine_opts.max_waiting = c.max_queue;
  const std::string model_path = c.model.empty() ? default_model_path() : c.model;
  server::ApiServer api(server_options(c, model_path));

  // Signals are taken by sigwait below, never by a handler: block them before any thread
  // starts, so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  api.start();
  std::printf("tokamak serve: listening on http://%s:%u/\n",
              c.host.find(':') != std::string::npos ? ("[" + c.host + "]").c_str() : c.host.c_str(),
              api.port());
  std::fflush(stdout);

  std::mutex mu;
  std::optional<std::string> load_error;
  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    try {
      LoadedModel m =
          load_model(model_path, c.threads, c.affinity, 0, engine_opts.max_batched_tokens);
      tag_model(engine_opts, *m.file);
      api.attach({.file = std::move(m.file),
                  .model = std::move(m.model),
                  .tokenizer = std::move(m.tokenizer),
                  .engine = engine_opts});
      std::fprintf(stderr, "%s", engine_summary(api.engine()->core(), m.threads).c_str());
      std::printf("tokamak serve: model loaded (%.0f ms)\n", m.load_ms);
      std::fflush(stdout);
      loaded = true;
    } catch (const std::exception& e) {
      std::lock_guard lock(mu);
      load_error = e.what();
    }
  });

  // Wait for a signal, or for the model to fail to load.
  const timespec poll{0, 200'000'000};
  while (true) {
    const int sig = sigtimedwait(&signals, nullptr, &poll);
    if (sig == SIGINT || sig == SIGTERM) {
      std::printf("tokamak serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stdout);
      break;
    }
    std::lock_guard lock(mu);
    if (load_error) break;
  }
  loader.join();  // a load in progress finishes first (it cannot be interrupted)
  api.shutdown();
  if (load_error) throw Error(*load_error);
  std::printf("tokamak serve: stopped\n");
  std::fflush(stdout);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto c = std::make_shared<ServeConfig>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (web page at /)");
  cmd->add_option("-m,--model", c->model, "GGUF model file (default: the default model)");
  add_thread_flags(*cmd, c->threads, c->affinity);
  cmd->add_option("--host", c->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", c->port, "port to listen on (0 = any free port)")
      ->capture_default_str();
  cmd->add_option("--io-threads", c->io_threads, "HTTP I/O threads")->capture_default_str();
  cmd->add_option("--api-key", c->api_keys,
                  "require 'Authorization: Bearer KEY' on /v1/* (repeatable)");
  cmd->add_option("--api-key-file", c->api_key_file, "file with one API key per line");
  cmd->add_option("--max-queue", c->max_queue,
                  "requests that may wait for the engine; more get 429")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", c->shutdown_timeout_s,
                  "seconds in-flight requests get to finish on SIGTERM/SIGINT")
      ->capture_default_str();
  cmd->add_option("--cors-origin", c->cors_origin,
                  "send CORS headers allowing this origin ('*' for any)");
  cmd->add_option("--served-model-name", c->served_model_name,
                  "the model's name in the API (default: the file name without .gguf)");
  cmd->add_option("--max-body-bytes", c->max_body_bytes, "largest request body (413 beyond)")
      ->capture_default_str();
  cmd->add_option("--read-timeout", c->read_timeout_s,
                  "seconds a client has to send a whole request")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", c->idle_timeout_s,
                  "seconds an idle keep-alive connection stays open")
      ->capture_default_str();
  c->engine.add_to(*cmd);
  cmd->callback([c] { run_serve(*c); });
}

}  // namespace tokamak::cli
