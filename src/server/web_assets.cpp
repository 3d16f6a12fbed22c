#include "server/web_assets.h"

namespace tokamak::server {

const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const WebAsset& asset : web_assets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace tokamak::server
