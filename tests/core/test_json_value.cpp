#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/json_value.h"

namespace atl {
namespace {

using nlohmann::json;

std::optional<ErrorCode> code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

TEST(JsonValue, ReadsIntegersInRange) {
  EXPECT_EQ(json_int64(json::parse("-9223372036854775808"), "x"), INT64_MIN);
  EXPECT_EQ(json_int64(json::parse("9223372036854775807"), "x"), INT64_MAX);
  EXPECT_EQ(json_int(json::parse("-2147483648"), "x"), INT32_MIN);
  EXPECT_EQ(json_int64_list(json::parse("[1, -2, 3]"), "x"), (std::vector<int64_t>{1, -2, 3}));
}

// nlohmann's own get<int64_t>() casts these, which is undefined for a float out of range.
TEST(JsonValue, RejectsFloatsStringsAndValuesOutOfRange) {
  for (const char* text : {"1e300", "2.5", "-1e19", "\"3\"", "null", "true", "[1]", "9223372036854775808",
                           "18446744073709551615"}) {
    EXPECT_EQ(code_of([&] { json_int64(json::parse(text), "x"); }), ErrorCode::kParse) << text;
  }
  for (const char* text : {"2147483648", "-2147483649", "1e10"}) {
    EXPECT_EQ(code_of([&] { json_int(json::parse(text), "x"); }), ErrorCode::kParse) << text;
  }
  EXPECT_EQ(code_of([&] { json_int64_list(json::parse("[1, 1e300]"), "x"); }), ErrorCode::kParse);
  EXPECT_EQ(code_of([&] { json_int64_list(json::parse("{\"a\": 1}"), "x"); }), ErrorCode::kParse);
}

TEST(JsonValue, ErrorNamesTheField) {
  try {
    json_int64(json::parse("0.5"), "slice_bytes");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slice_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atl
