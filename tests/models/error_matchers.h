#pragma once
// Runs a callable that must throw atl::Error with the given code; returns the message so tests
// can check that it names what failed.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace atl::testing {

template <typename F>
std::string error_message(F&& f, ErrorCode expected) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), std::string(error_code_name(expected))) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "expected an atl::Error (" << error_code_name(expected) << "), nothing was thrown";
  return "";
}

}  // namespace atl::testing
