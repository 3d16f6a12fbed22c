#pragma once
// The web page's files (web/*.html, *.js, *.css), compiled into the binary by
// cmake/embed_web.cmake so that `tokamak serve` needs nothing beside it and works offline.

#include <span>
#include <string_view>

namespace tokamak::server {

struct WebAsset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;
};

std::span<const WebAsset> web_assets();

// The asset served at an URL path: "/" is /index.html. nullptr when there is none.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace tokamak::server
