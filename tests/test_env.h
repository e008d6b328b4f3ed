#pragma once
// The tests' environment: a variable set for one scope, and how much slower than alone the GPU
// tests run. ATOLL_TEST_SLOWDOWN (a factor >= 1, default 1) is set by runs that instrument every
// kernel and share the device between processes (scripts/gpu/run-on-device.sh, STEPS=csan:
// compute-sanitizer, 15 processes on one GPU). There, assertions about how long something took
// or about device-wide memory say nothing about the code and are not judged (the plain run
// judges them), and limits that tell a hang from slow progress are stretched by the factor.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

namespace atl::test {

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// ATOLL_TEST_SLOWDOWN; a value that is not a number >= 1 fails the test that reads it.
inline double slowdown() {
  const char* v = std::getenv("ATOLL_TEST_SLOWDOWN");
  if (v == nullptr || *v == '\0') return 1.0;
  char* end = nullptr;
  const double f = std::strtod(v, &end);
  if (*end != '\0' || !(f >= 1.0) || f > 1e6) {
    throw std::invalid_argument("ATOLL_TEST_SLOWDOWN='" + std::string(v) + "': expected a factor from 1 to 1e6");
  }
  return f;
}

// ATOLL_OP_PERF=1: the tests that time things also report the times (reports, not assertions).
inline bool perf_mode() {
  const char* v = std::getenv("ATOLL_OP_PERF");
  return v != nullptr && std::string(v) == "1";
}

// Whether timings and device-wide readings are judged: only when the tests run as they would alone.
inline bool timing_judged() { return slowdown() == 1.0; }

// A hang limit stretched by the slowdown.
template <typename Rep, typename Period>
std::chrono::milliseconds hang_limit(std::chrono::duration<Rep, Period> d) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::chrono::duration<double, std::milli>(d).count() * slowdown()));
}

}  // namespace atl::test
