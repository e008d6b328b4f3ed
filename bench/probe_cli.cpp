#include "probe_cli.h"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>

namespace atl {

struct ProbeCli::Impl {
  CLI::App app;
};

ProbeCli::ProbeCli(const std::string& description) : impl_(new Impl{CLI::App{description}}) {}
ProbeCli::~ProbeCli() = default;

template <class T>
void ProbeCli::option(const std::string& name, T& value, const std::string& help, ProbeCheck check) {
  CLI::Option* opt = impl_->app.add_option(name, value, help);
  if (check.kind == ProbeCheck::Kind::between) opt->check(CLI::Range(check.lo, check.hi));
  if (check.kind == ProbeCheck::Kind::positive) opt->check(CLI::PositiveNumber);
}

template void ProbeCli::option(const std::string&, int&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, int64_t&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, uint64_t&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, bool&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::string&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::vector<int>&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::vector<int64_t>&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::vector<uint64_t>&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::vector<unsigned>&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::vector<double>&, const std::string&, ProbeCheck);
template void ProbeCli::option(const std::string&, std::vector<std::string>&, const std::string&, ProbeCheck);

void ProbeCli::flag(const std::string& name, bool& value, const std::string& help) {
  impl_->app.add_flag(name, value, help);
}

std::optional<int> ProbeCli::parse(int argc, char** argv) {
  try {
    impl_->app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return impl_->app.exit(e);
  }
  return std::nullopt;
}

int run_probe(const char* name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return 1;
  }
}

}  // namespace atl
