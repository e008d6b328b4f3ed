#include "ir/attrs.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_value.h"

namespace atl {

namespace {
template <typename T>
const T& typed(const std::map<std::string, AttrValue>& m, const std::string& key, const char* type) {
  auto it = m.find(key);
  ATOLL_CHECK(it != m.end(), kInvalidGraph, "missing attribute '{}'", key);
  const T* v = std::get_if<T>(&it->second);
  ATOLL_CHECK(v != nullptr, kInvalidGraph, "attribute '{}' is not {}", key, type);
  return *v;
}
}  // namespace

int64_t Attrs::get_int(const std::string& key) const { return typed<int64_t>(map_, key, "an int"); }
int64_t Attrs::get_int(const std::string& key, int64_t def) const { return has(key) ? get_int(key) : def; }
double Attrs::get_float(const std::string& key) const {
  auto it = map_.find(key);
  if (it != map_.end()) {
    if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  }
  return typed<double>(map_, key, "a float");
}
double Attrs::get_float(const std::string& key, double def) const { return has(key) ? get_float(key) : def; }
const std::vector<int64_t>& Attrs::get_ints(const std::string& key) const {
  return typed<std::vector<int64_t>>(map_, key, "an int list");
}
std::vector<int64_t> Attrs::get_ints(const std::string& key, std::vector<int64_t> def) const {
  return has(key) ? get_ints(key) : def;
}
const std::string& Attrs::get_string(const std::string& key) const {
  return typed<std::string>(map_, key, "a string");
}
std::string Attrs::get_string(const std::string& key, std::string def) const {
  return has(key) ? get_string(key) : def;
}

// JSON keeps the variant's type: ints and int lists as JSON integers, floats tagged so that
// 1.0 does not come back as the integer 1.
void to_json(nlohmann::json& j, const Attrs& a) {
  j = nlohmann::json::object();
  for (const auto& item : a.items()) {
    const std::string& k = item.first;  // a plain name: lambdas may not capture structured bindings before clang 16
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, double>) {
            j[k] = nlohmann::json{{"f", x}};
          } else {
            j[k] = x;
          }
        },
        item.second);
  }
}

void from_json(const nlohmann::json& j, Attrs& a) {
  ATOLL_CHECK(j.is_object(), kParse, "attributes must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (v.is_number_integer()) {
      a.set(k, json_int64(v, k));
    } else if (v.is_object() && v.contains("f")) {
      a.set(k, v.at("f").get<double>());
    } else if (v.is_array()) {
      a.set(k, json_int64_list(v, k));
    } else if (v.is_string()) {
      a.set(k, v.get<std::string>());
    } else {
      ATOLL_THROW(kParse, "attribute '{}' has an unsupported JSON type", k);
    }
  }
}

}  // namespace atl
