#include "apps/crash_report.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace atl::apps {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

void write_text(const char* s) {
  // Only async-signal-safe calls from here on; a short write loses part of the report, nothing else.
  const ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void report_and_reraise(int sig) {
  write_text("atoll: fatal signal ");
  const char* name = sigabbrev_np(sig);
  write_text(name != nullptr ? name : "?");
  write_text("; call stack (addr2line -f -C -e <binary> <offset>):\n");
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND restored the default action: re-raising ends the process with the same signal
  // (exit status, core dump) as without the handler.
  ::raise(sig);
}

}  // namespace

void install_crash_report() {
  // backtrace() loads libgcc on first use, which is not safe inside a handler: load it now.
  void* warm[1];
  ::backtrace(warm, 1);
  struct sigaction sa {};
  sa.sa_handler = report_and_reraise;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int sig : kFatalSignals) ::sigaction(sig, &sa, nullptr);
}

}  // namespace atl::apps
