// tokamak quantize: re-encode a model's weight matrices as another tensor type.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "model/quantize_model.h"

namespace tokamak::cli {

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string in, out, type;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("quantize",
                                 "convert a GGUF model's weights to "
                                 "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k");
  cmd->add_option("input", o->in, "input GGUF model")->required();
  cmd->add_option("output", o->out, "output GGUF file")->required();
  cmd->add_option("type", o->type, "target tensor type")->required();
  cmd->callback([o] {
    const auto target = dtype_from_name(o->type);
    if (!target) throw Error("unknown tensor type '" + o->type + "'");
    const auto r = quantize_model(o->in, o->out, *target);
    std::fprintf(stderr,
                 "[tokamak] %s: %lld tensors converted (%lld of them in the fallback type: rows "
                 "not whole 256-element super-blocks), %lld kept, %.1f MB -> %.1f MB\n",
                 o->out.c_str(), static_cast<long long>(r.tensors_converted),
                 static_cast<long long>(r.tensors_fallback), static_cast<long long>(r.tensors_kept),
                 r.bytes_in / 1e6, r.bytes_out / 1e6);
  });
}

}  // namespace tokamak::cli
