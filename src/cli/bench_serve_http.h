#pragma once
// The HTTP side of `tokamak bench serve`: an asynchronous client on one io_context thread
// (Boost.Beast, kept inside bench_serve_http.cpp) that sends POST requests at planned
// times under a concurrency cap, reads each streamed response as it arrives and stamps its
// chunks. A request that cannot be sent or read (refused connection, HTTP error, error
// event, server gone, silence past the timeout) is recorded as failed with its reason; the
// run always goes on to the end.
//
// Two shapes of load: a fixed list of independent requests (LoadPlan), and chains of
// requests where each is made from the replies before it (ChainPlan: the turns of a chat),
// sent one after another. The first is a chain of one request per body.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/bench_serve_sse.h"

namespace tokamak::cli {

// http://host[:port][/prefix]
struct ServerUrl {
  std::string host;
  uint16_t port = 80;
  std::string prefix;  // path in front of "/v1/...", without a trailing slash ("" or "/api")

  std::string origin() const;  // "http://host:port"
};

// Throws Error naming what is wrong: another scheme (https is not supported), no host, a bad
// port, a query or fragment. A trailing "/v1" is dropped (the routes add it).
ServerUrl parse_url(const std::string& url);

// Throws Error when the URL's host name cannot be resolved.
void check_resolvable(const ServerUrl& url);

struct ClientOptions {
  ServerUrl url;
  std::string api_key;                        // sent as "Authorization: Bearer KEY" when not empty
  std::chrono::milliseconds timeout{600000};  // the longest silence while a request is open
};

// One request as the client saw it.
struct RequestRecord {
  BenchClock::time_point sent{};   // when its connection was started
  BenchClock::time_point ended{};  // when the response ended or failed
  int http_status = 0;             // 0 when no response head arrived
  StreamTrace trace;
  std::optional<std::string> failure;  // why it failed; nullopt when it completed

  bool ok() const { return !failure.has_value(); }
};

struct LoadPlan {
  std::string target;                      // e.g. "/v1/completions" (the URL prefix is added)
  std::vector<std::string> bodies;         // JSON bodies, sent in this order
  std::vector<double> arrival_s;           // parallel to bodies, ascending: when each may be sent
  std::optional<int32_t> max_concurrency;  // most requests in flight; nullopt = no cap
};

struct LoadResult {
  std::vector<RequestRecord> records;  // parallel to the plan's bodies
  BenchClock::time_point start{};      // when the first request could be sent
  BenchClock::time_point end{};        // when the last one ended
  int32_t peak_in_flight = 0;
};

// Resolves the host once, then sends every body at its arrival time, waiting for a free
// slot when max_concurrency requests are in flight. Throws Error only when the host name
// cannot be resolved; every other failure is a failed record.
LoadResult run_load(const ClientOptions& client, const LoadPlan& plan);

// A closed loop: chains of requests (the turns of a conversation), a chain's next request
// made from its completed ones and sent as soon as the previous one ended. A chain holds
// one of max_concurrency's slots from its first request to its last.
struct ChainPlan {
  std::string target;
  std::vector<double> arrival_s;           // one per chain, ascending: its first request
  std::optional<int32_t> max_concurrency;  // most chains in flight; nullopt = no cap
  // The body of chain `c`'s next request, given its requests so far (all completed), or
  // nullopt when the chain is over. Called on the client thread, one call at a time.
  std::function<std::optional<std::string>(size_t c, std::span<const RequestRecord> done)> next;
};

struct ChainResult {
  std::vector<std::vector<RequestRecord>> chains;  // parallel to arrival_s, in sending order
  BenchClock::time_point start{};
  BenchClock::time_point end{};
  int32_t peak_in_flight = 0;  // chains
};

// Runs every chain as run_load runs a body; a failed request ends its chain (later ones
// cannot be made without its reply). Throws Error only when the host cannot be resolved.
ChainResult run_chains(const ClientOptions& client, const ChainPlan& plan);

struct HttpReply {
  int status = 0;
  std::string body;
};

// A whole GET request (e.g. /v1/models). Throws Error with the reason when the server cannot
// be reached or the answer cannot be read.
HttpReply http_get(const ClientOptions& client, const std::string& target);

}  // namespace tokamak::cli
