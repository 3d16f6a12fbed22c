#include "model/registry.h"

#include <array>
#include <utility>

#include "core/error.h"
#include "format/gguf.h"
#include "model/arch/architectures.h"

namespace tokamak {
namespace {

constexpr std::array<std::pair<std::string_view, ModelFactory>, 1> kArchitectures = {{
    {"llama", &make_llama_model},
}};

}  // namespace

ModelFactory find_architecture(std::string_view name) {
  for (const auto& [arch, factory] : kArchitectures) {
    if (arch == name) return factory;
  }
  return nullptr;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& entry : kArchitectures) names.emplace_back(entry.first);
  return names;
}

std::unique_ptr<Model> Model::load(std::shared_ptr<const gguf::File> file,
                                   const ModelOptions& opts) {
  if (!file) throw Error("Model::load: no file");
  std::string arch;
  try {
    arch = file->get_string("general.architecture").value_or("");
  } catch (const Error& e) {
    throw Error(file->path() + ": metadata general.architecture: " + e.what());
  }
  if (arch.empty()) throw Error(file->path() + ": missing metadata general.architecture");
  const ModelFactory factory = find_architecture(arch);
  if (factory == nullptr) {
    std::string supported;
    for (const auto& name : supported_architectures()) {
      supported += (supported.empty() ? "" : ", ") + name;
    }
    throw Error(file->path() + ": unsupported architecture '" + arch +
                "' (supported: " + supported + ")");
  }
  const HParams hp = HParams::from_gguf(*file);
  if (opts.max_batch_tokens <= 0) throw Error("max_batch_tokens must be positive");
  if (opts.n_ctx < 0) throw Error("n_ctx must not be negative");
  return factory(std::move(file), hp, opts);
}

}  // namespace tokamak
