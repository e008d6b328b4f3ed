#include "core/json_value.h"

#include <limits>

#include "core/error.h"

namespace atl {

int64_t json_int64(const nlohmann::json& value, std::string_view field) {
  // Unsigned first: nlohmann hands out the signed pointer for unsigned values too.
  if (const auto* u = value.get_ptr<const nlohmann::json::number_unsigned_t*>()) {
    ATOLL_CHECK(*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), kParse,
                "'{}' is {}, beyond the 64-bit integer range", field, *u);
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = value.get_ptr<const nlohmann::json::number_integer_t*>()) return *i;
  ATOLL_THROW(kParse, "'{}' must be an integer, not {}", field, value.type_name());
}

int json_int(const nlohmann::json& value, std::string_view field) {
  const int64_t v = json_int64(value, field);
  ATOLL_CHECK(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(), kParse,
              "'{}' is {}, beyond the 32-bit integer range", field, v);
  return static_cast<int>(v);
}

std::vector<int64_t> json_int64_list(const nlohmann::json& value, std::string_view field) {
  ATOLL_CHECK(value.is_array(), kParse, "'{}' must be an array of integers, not {}", field, value.type_name());
  std::vector<int64_t> out;
  out.reserve(value.size());
  for (const nlohmann::json& v : value) out.push_back(json_int64(v, field));
  return out;
}

}  // namespace atl
