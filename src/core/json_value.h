#pragma once
// Integers read from JSON that came from files or users. nlohmann's get<int64_t>() casts a float
// such as 1e300 to an integer, which is undefined behaviour; these accept JSON integers only, in
// range, and throw a kParse error naming the field otherwise.
#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace atl {

int64_t json_int64(const nlohmann::json& value, std::string_view field);
int json_int(const nlohmann::json& value, std::string_view field);
std::vector<int64_t> json_int64_list(const nlohmann::json& value, std::string_view field);

}  // namespace atl
