#pragma once
// Router: the server's routes (method + exact path) and what it answers when none fits:
// 404 for an unknown path, 405 (with the path's methods for `Allow`) for a known path and
// another method, and, when CORS is on, 204 for an OPTIONS preflight on a known path.

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_types.h"

namespace tokamak::server {

class Router {
 public:
  // Throws tokamak::Error when the same method and path are routed twice.
  void add(std::string method, std::string path, Handler handler);

  struct Match {
    const Handler* handler = nullptr;  // the route's handler; null: the server answers `status`
    int status = 0;                    // 404, 405, or 204 (preflight)
    std::string allow;                 // with 405 and 204: "GET, POST" (and OPTIONS with CORS)
  };
  // `cors`: answer OPTIONS on a known path as a preflight (unless it has an OPTIONS route).
  Match find(std::string_view method, std::string_view path, bool cors) const;

 private:
  // path -> (method, handler), in the order routed
  std::map<std::string, std::vector<std::pair<std::string, Handler>>, std::less<>> routes_;
};

}  // namespace tokamak::server
