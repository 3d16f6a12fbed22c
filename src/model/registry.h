#pragma once
// Architecture registry: general.architecture -> factory. The table is explicit (registry.cpp)
// rather than filled by static initialisers, which a static library would drop.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"

namespace tokamak {

using ModelFactory = std::unique_ptr<Model> (*)(std::shared_ptr<const gguf::File> file,
                                                const HParams& hparams, const ModelOptions& opts);

// The factory for an architecture name, or nullptr.
ModelFactory find_architecture(std::string_view name);
std::vector<std::string> supported_architectures();

}  // namespace tokamak
