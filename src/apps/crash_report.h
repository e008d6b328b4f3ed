#pragma once

namespace atl::apps {

// On a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints one line naming the signal
// and the call stack as module+offset frames (`addr2line -f -C -e atoll 0xOFFSET` resolves them
// against the same binary), then lets the signal take the process down as it would have. A crash
// in a long run on a lent GPU otherwise leaves only "Segmentation fault" behind.
void install_crash_report();

}  // namespace atl::apps
