#pragma once
#include <CLI/CLI.hpp>

namespace atl::apps {

// Registers every subcommand; each runs from its parse callback and throws atl::Error on failure.
void add_commands(CLI::App& app);

void add_models_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_l2_command(CLI::App& app);
void add_colocate_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_serve_bench_command(CLI::App& bench);  // `atoll bench serve`
void add_profile_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace atl::apps
