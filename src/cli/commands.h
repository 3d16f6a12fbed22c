#pragma once
// Each subcommand lives in its own cmd_<name>.cpp and registers itself on the CLI11 app.
// A command's callback returns through CLI11 exceptions or by throwing tokamak::Error, which
// main() turns into one line on stderr and a non-zero exit.

namespace CLI {
class App;
}

namespace tokamak::cli {

void add_run_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_make_synthetic_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_serve_command(CLI::App& app);

// Exit status a command asks main() to return (0 unless set).
int& exit_status();

}  // namespace tokamak::cli
