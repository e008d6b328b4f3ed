#include "core/env.h"

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

}  // namespace atl
