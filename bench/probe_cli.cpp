#include "probe_cli.h"

#include <CLI/CLI.hpp>

namespace atl {

struct ProbeCli::Impl {
  CLI::App app;
};

namespace {

template <class T>
void add_checked(CLI::App& app, const std::string& name, T& value, const std::string& help, ProbeCheck check) {
  CLI::Option* opt = app.add_option(name, value, help);
  if (check.kind == ProbeCheck::Kind::between) opt->check(CLI::Range(check.lo, check.hi));
  if (check.kind == ProbeCheck::Kind::positive) opt->check(CLI::PositiveNumber);
}

}  // namespace

ProbeCli::ProbeCli(const std::string& description) : impl_(new Impl{CLI::App{description}}) {}
ProbeCli::~ProbeCli() = default;

void ProbeCli::option(const std::string& name, int& value, const std::string& help, ProbeCheck check) {
  add_checked(impl_->app, name, value, help, check);
}
void ProbeCli::option(const std::string& name, int64_t& value, const std::string& help, ProbeCheck check) {
  add_checked(impl_->app, name, value, help, check);
}
void ProbeCli::option(const std::string& name, uint64_t& value, const std::string& help, ProbeCheck check) {
  add_checked(impl_->app, name, value, help, check);
}
void ProbeCli::option(const std::string& name, bool& value, const std::string& help) {
  impl_->app.add_option(name, value, help);
}
void ProbeCli::option(const std::string& name, std::string& value, const std::string& help) {
  impl_->app.add_option(name, value, help);
}
void ProbeCli::option(const std::string& name, std::vector<int>& values, const std::string& help, ProbeCheck check) {
  add_checked(impl_->app, name, values, help, check);
}
void ProbeCli::option(const std::string& name, std::vector<int64_t>& values, const std::string& help,
                      ProbeCheck check) {
  add_checked(impl_->app, name, values, help, check);
}
void ProbeCli::option(const std::string& name, std::vector<uint64_t>& values, const std::string& help,
                      ProbeCheck check) {
  add_checked(impl_->app, name, values, help, check);
}
void ProbeCli::option(const std::string& name, std::vector<unsigned>& values, const std::string& help,
                      ProbeCheck check) {
  add_checked(impl_->app, name, values, help, check);
}
void ProbeCli::option(const std::string& name, std::vector<double>& values, const std::string& help, ProbeCheck check) {
  add_checked(impl_->app, name, values, help, check);
}
void ProbeCli::option(const std::string& name, std::vector<std::string>& values, const std::string& help) {
  impl_->app.add_option(name, values, help);
}
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

}  // namespace atl
