#pragma once
// Factories of the architectures in this folder, one per file; registry.cpp lists them.

#include <memory>

#include "model/hparams.h"
#include "model/model.h"

namespace tokamak {

// "llama" (llama 1-3 without rope_freqs, SmolLM, TinyLlama, ...): arch/llama.cpp.
std::unique_ptr<Model> make_llama_model(std::shared_ptr<const gguf::File> file,
                                        const HParams& hparams, const ModelOptions& opts);

}  // namespace tokamak
