// atoll: one thin CLI over the layers. Each subcommand lives in its own cmd_*.cpp.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "apps/commands.h"
#include "apps/crash_report.h"
#include "core/error.h"
#include "core/text.h"

int main(int argc, char** argv) {
  atl::apps::install_crash_report();
  CLI::App app{"atoll: real-time and best-effort DNN inference sharing one GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "atoll 0.1.0");
  atl::apps::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const atl::Error& e) {
    // Messages quote file contents and arguments: escaped, so no raw bytes reach the terminal.
    fmt::print(stderr, "atoll: {}: {}\n", atl::error_code_name(e.code()), atl::printable(e.message()));
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "atoll: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "atoll: error: {}\n", atl::printable(e.what()));
    return 1;
  }
  // Printed results that never reached their file (a full disk, /dev/full) are a failure too.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    fmt::print(stderr, "atoll: i/o error: cannot write standard output: {}\n", std::strerror(errno));
    return 1;
  }
  return 0;
}
