#include "apps/commands.h"

namespace atl::apps {

void add_commands(CLI::App& app) {
  add_models_command(app);
  add_info_command(app);
  add_run_command(app);
  add_l2_command(app);
  add_colocate_command(app);
  add_bench_command(app);
  add_profile_command(app);
  add_serve_command(app);
}

}  // namespace atl::apps
