#pragma once
#include <string>

namespace tokamak::cli {

// The model used when no -m is given: models/SmolLM2-135M-Instruct.Q4_1.gguf under the
// repository (found from TOKAMAK_HOME, else relative to the executable's location, else the
// working directory). Throws Error with the set-up command to run when it is missing.
std::string default_model_path();

}  // namespace tokamak::cli
