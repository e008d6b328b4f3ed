#pragma once
// The code of the atl::Error `f` throws; a test failure (and kInternal) when it throws none.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"

namespace atl::test {

inline ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error thrown";
  return ErrorCode::kInternal;
}

}  // namespace atl::test
