#pragma once
// Switches read from the environment (ATOLL_CUDA_*), parsed strictly: a value that is neither on
// nor off is refused by name, so a typo such as "false" or "off" never silently keeps the default.
namespace atl {

// Unset or empty: `fallback`; "1": true; "0": false; anything else throws kInvalidArgument naming
// the variable and the value.
bool env_switch(const char* name, bool fallback);

}  // namespace atl
