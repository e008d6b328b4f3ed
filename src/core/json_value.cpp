#include "core/json_value.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/text.h"

namespace atl {

nlohmann::json parse_json_document(std::string_view text, std::string_view source) {
  std::vector<std::set<std::string>> open_objects;  // keys seen so far in each enclosing object
  const auto unique_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty()) {
      const std::string key = parsed.get<std::string>();
      ATOLL_CHECK(open_objects.back().insert(key).second, kParse, "{}: key '{}' appears twice in one object",
                  printable(source), printable(key));
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, unique_keys);
  } catch (const nlohmann::json::exception& e) {
    ATOLL_THROW(kParse, "{}: not valid JSON: {}", printable(source), json_error_text(e));
  }
}

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  if (what.starts_with("[json.exception.")) {
    const size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return printable(what);
}

void json_only_keys(const nlohmann::json& j, std::initializer_list<std::string_view> allowed, std::string_view field) {
  ATOLL_CHECK(j.is_object(), kParse, "'{}' must be an object, not {}", field, j.type_name());
  for (const auto& [key, value] : j.items()) {
    ATOLL_CHECK(std::find(allowed.begin(), allowed.end(), key) != allowed.end(), kParse, "'{}': unknown key '{}'",
                field, printable(key));
  }
}

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
