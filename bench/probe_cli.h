// The command line of the CUDA probes in bench/. CLI11 2.1 is header-only and costs about 8 s of
// compile per translation unit that includes it; the probes share this one compiled parser.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace atl {

// A check on a numeric option (on every element of a list): none, inclusive bounds, or > 0.
struct ProbeCheck {
  enum class Kind { none, between, positive };
  Kind kind = Kind::none;
  double lo = 0, hi = 0;
  static constexpr ProbeCheck between(double lo, double hi) { return {Kind::between, lo, hi}; }
};
inline constexpr ProbeCheck kPositive{ProbeCheck::Kind::positive};

class ProbeCli {
 public:
  explicit ProbeCli(const std::string& description);
  ~ProbeCli();
  ProbeCli(const ProbeCli&) = delete;
  ProbeCli& operator=(const ProbeCli&) = delete;

  // Each option binds a variable that keeps its value when the option is not given. T: int,
  // int64_t, uint64_t, bool, std::string, or a std::vector of int, int64_t, uint64_t, unsigned,
  // double or std::string (the types probe_cli.cpp instantiates).
  template <class T>
  void option(const std::string& name, T& value, const std::string& help, ProbeCheck check = {});
  void flag(const std::string& name, bool& value, const std::string& help);

  // The exit status when the program should stop here (--help printed, or a message for a bad
  // command line); nothing when it should run.
  std::optional<int> parse(int argc, char** argv);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A probe's main body: its exit status, or on an exception one line "NAME: message" on stderr and 1.
int run_probe(const char* name, const std::function<int()>& body);

}  // namespace atl
