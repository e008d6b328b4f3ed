#pragma once
// JSON that came from files or users.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace atl {

// A whole document: a key given twice in one object is a kParse error (parsers keep one of the two
// silently, so `"rate": 100, "rate": 200` would run at 200), and syntax errors and numbers out of
// range (1e400) are kParse errors naming `source` in one printable line.
nlohmann::json parse_json_document(std::string_view text, std::string_view source);
// nlohmann's message without its "[json.exception.NAME.ID] " prefix, printable.
std::string json_error_text(const nlohmann::json::exception& e);
// A kParse error naming `field` for the first key of object `j` outside `allowed`.
void json_only_keys(const nlohmann::json& j, std::initializer_list<std::string_view> allowed, std::string_view field);

// Integers: nlohmann's get<int64_t>() casts a float such as 1e300 to an integer, which is
// undefined behaviour; these accept JSON integers only, in range, and throw a kParse error naming
// the field otherwise.
int64_t json_int64(const nlohmann::json& value, std::string_view field);
int json_int(const nlohmann::json& value, std::string_view field);
std::vector<int64_t> json_int64_list(const nlohmann::json& value, std::string_view field);

}  // namespace atl
