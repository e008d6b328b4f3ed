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

// Documents from files: a key twice in one object (at any depth) is refused, the same key in two
// objects is not, and nlohmann's exception prefix never reaches the user.
TEST(JsonValue, DocumentsRefuseRepeatedKeysAndReadAsOneLine) {
  EXPECT_EQ(parse_json_document(R"({"a": {"b": 1}, "c": [{"b": 2}, {"b": 3}]})", "f.json")["c"][1]["b"], 3);
  for (const char* text : {R"({"rate": 100, "rate": 200})", R"({"x": [{"k": 1, "k": 1}]})"}) {
    try {
      parse_json_document(text, "f.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kParse);
      EXPECT_NE(e.message().find("appears twice"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("f.json"), std::string::npos) << e.message();
    }
  }
  for (const char* text : {R"({"rate": 1e400})", "{", "[1, 2"}) {
    try {
      parse_json_document(text, "f.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.message().find("[json.exception"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("not valid JSON"), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(code_of([] { json_only_keys(json::parse(R"({"a": 1, "hti_ratio": 2})"), {"a", "hit_ratio"}, "cfg"); }),
            ErrorCode::kParse);
  EXPECT_EQ(code_of([] { json_only_keys(json::parse(R"({"a": 1})"), {"a", "hit_ratio"}, "cfg"); }), std::nullopt);
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
