// Switches from the environment: unset or empty keeps the default, 0 and 1 set it, anything else
// is refused by name.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/env.h"
#include "core/error.h"
#include "../error_code_of.h"

namespace atl {
namespace {

constexpr const char* kName = "ATOLL_TEST_SWITCH";

TEST(EnvSwitch, UnsetOrEmptyKeepsTheFallback) {
  unsetenv(kName);
  EXPECT_TRUE(env_switch(kName, true));
  EXPECT_FALSE(env_switch(kName, false));
  setenv(kName, "", 1);
  EXPECT_TRUE(env_switch(kName, true));
  EXPECT_FALSE(env_switch(kName, false));
  unsetenv(kName);
}

TEST(EnvSwitch, ZeroAndOneSetIt) {
  setenv(kName, "0", 1);
  EXPECT_FALSE(env_switch(kName, true));
  setenv(kName, "1", 1);
  EXPECT_TRUE(env_switch(kName, false));
  unsetenv(kName);
}

TEST(EnvSwitch, OtherValuesAreRefusedByName) {
  for (const char* v : {"false", "true", "off", "on", "2", "01", "1 ", "\x1b[31m"}) {
    setenv(kName, v, 1);
    EXPECT_EQ(test::code_of([] { env_switch(kName, true); }), ErrorCode::kInvalidArgument) << v;
    try {
      env_switch(kName, true);
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("ATOLL_TEST_SWITCH must be 0 or 1"), std::string::npos) << e.message();
      EXPECT_EQ(e.message().find('\x1b'), std::string::npos) << "raw control bytes echoed";
    }
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace atl
