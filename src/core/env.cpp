#include "core/env.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/text.h"

namespace atl {

bool env_switch(const char* name, bool fallback) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return fallback;
  const std::string_view v(raw);
  ATOLL_CHECK(v == "0" || v == "1", kInvalidArgument, "{} must be 0 or 1, not '{}'", name, printable(v));
  return v == "1";
}

std::map<std::string, std::string> env_with_prefix(std::string_view prefix) {
  std::map<std::string, std::string> found;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (!entry.starts_with(prefix) || eq == std::string_view::npos) continue;
    found[printable(entry.substr(0, eq))] = printable(entry.substr(eq + 1));
  }
  return found;
}

}  // namespace atl
