#include "cli/default_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace tokamak::cli {

namespace fs = std::filesystem;

std::string default_model_path() {
  const fs::path rel = fs::path("models") / "SmolLM2-135M-Instruct.Q4_1.gguf";
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("TOKAMAK_HOME")) roots.emplace_back(home);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build/src/tokamak -> repository root is two or three levels up.
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
      roots.push_back(p);
    }
  }
  roots.push_back(fs::current_path(ec));
  for (const auto& root : roots) {
    if (fs::exists(root / rel, ec)) return (root / rel).string();
  }
  throw Error("default model " + rel.string() +
              " not found; run scripts/setup.sh (or pass -m MODEL.gguf)");
}

}  // namespace tokamak::cli
