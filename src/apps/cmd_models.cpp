#include <fmt/core.h>

#include "apps/commands.h"
#include "models/zoo.h"

namespace atl::apps {

void add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("models", "List the model zoo");
  cmd->callback([] {
    fmt::print("{:<14} {:<22} {}\n", "model", "input", "description");
    for (const ModelInfo& m : list_models()) fmt::print("{:<14} {:<22} {}\n", m.name, m.input_desc, m.description);
  });
}

}  // namespace atl::apps
