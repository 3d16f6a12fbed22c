#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"tokamak: LLM inference and serving"};
  app.require_subcommand(1);
  tokamak::cli::add_run_command(app);
  tokamak::cli::add_chat_command(app);
  tokamak::cli::add_info_command(app);
  tokamak::cli::add_tokenize_command(app);
  tokamak::cli::add_quantize_command(app);
  tokamak::cli::add_make_synthetic_command(app);
  tokamak::cli::add_serve_command(app);
  tokamak::cli::add_bench_command(app);
  tokamak::cli::add_perplexity_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help); any bad command line exits 1, like every
    // other error, whatever CLI11's own code for it.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const tokamak::Error& e) {
    std::fprintf(stderr, "tokamak: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokamak: internal error: %s\n", e.what());
    return 2;
  }
  return tokamak::cli::exit_status();
}
