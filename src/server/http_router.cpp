#include "server/http_router.h"

#include "core/error.h"

namespace tokamak::server {

void Router::add(std::string method, std::string path, Handler handler) {
  auto& methods = routes_[path];
  for (const auto& [m, h] : methods) {
    if (m == method) throw Error("HTTP route " + method + " " + path + " is defined twice");
  }
  methods.emplace_back(std::move(method), std::move(handler));
}

Router::Match Router::find(std::string_view method, std::string_view path, bool cors) const {
  auto it = routes_.find(path);
  Match match;
  if (it == routes_.end()) {
    match.status = 404;
    return match;
  }
  std::string allow;
  for (const auto& [m, handler] : it->second) {
    if (m == method) {
      match.handler = &handler;
      return match;
    }
    if (!allow.empty()) allow += ", ";
    allow += m;
  }
  if (cors) allow += ", OPTIONS";
  match.status = cors && method == "OPTIONS" ? 204 : 405;
  match.allow = std::move(allow);
  return match;
}

}  // namespace tokamak::server
