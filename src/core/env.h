#pragma once
#include <map>
#include <string>
#include <string_view>

// Switches read from the environment (ATOLL_CUDA_*), parsed strictly: a value that is neither on
// nor off is refused by name, so a typo such as "false" or "off" never silently keeps the default.
namespace atl {

// Unset or empty: `fallback`; "1": true; "0": false; anything else throws kInvalidArgument naming
// the variable and the value.
bool env_switch(const char* name, bool fallback);

// Every variable whose name starts with `prefix`, name to value, both made printable (text.h):
// what a results file records of the switches a run was made under.
std::map<std::string, std::string> env_with_prefix(std::string_view prefix);

}  // namespace atl
