// atoll: one thin CLI over the layers. Each subcommand lives in its own cmd_*.cpp.
#include <fmt/core.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "apps/commands.h"
#include "apps/crash_report.h"
#include "core/error.h"
#include "core/text.h"

namespace {

// One line on stderr, escaped. Never throws: fmt::print(stderr) would throw on an unwritable
// stderr from inside a catch block, which ends the process with SIGABRT.
void report(std::string_view kind, std::string_view message) {
  const std::string line = fmt::format("atoll: {}: {}\n", kind, atl::printable(message));
  std::fputs(line.c_str(), stderr);
}

}  // namespace

int main(int argc, char** argv) {
  atl::apps::install_crash_report();
  // Logs go to stderr: stdout carries results, and --json consumers parse all of it (spdlog's
  // default logger wrote "profiling ..." lines into colocate's JSON in the padding modes).
  spdlog::set_default_logger(spdlog::stderr_color_mt("atoll"));
  CLI::App app{"atoll: real-time and best-effort DNN inference sharing one GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "atoll 0.1.0");
  atl::apps::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help and --version
    // Messages quote file contents and arguments: escaped, so no raw bytes reach the terminal.
    report("invalid argument", fmt::format("{} (see --help)", e.what()));
    return e.get_exit_code();
  } catch (const atl::Error& e) {
    report(atl::error_code_name(e.code()), e.message());
    return 1;
  } catch (const std::bad_alloc&) {
    report("error", "out of memory");
    return 1;
  } catch (const std::exception& e) {
    report("error", e.what());
    return 1;
  }
  // Printed results that never reached their file (a full disk, /dev/full) are a failure too.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    report("i/o error", fmt::format("cannot write standard output: {}", std::strerror(errno)));
    return 1;
  }
  return 0;
}
