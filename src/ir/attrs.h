#pragma once
// Node attributes: a small typed map, serializable to JSON.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace atl {

using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  bool has(const std::string& key) const { return map_.count(key) != 0; }
  void set(const std::string& key, AttrValue v) { map_[key] = std::move(v); }
  void erase(const std::string& key) { map_.erase(key); }

  // Getters throw kInvalidGraph on a missing key (no default) or a wrong type.
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double def) const;
  const std::vector<int64_t>& get_ints(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> def) const;
  const std::string& get_string(const std::string& key) const;
  std::string get_string(const std::string& key, std::string def) const;

  const std::map<std::string, AttrValue>& items() const { return map_; }
  friend bool operator==(const Attrs& a, const Attrs& b) { return a.map_ == b.map_; }

 private:
  std::map<std::string, AttrValue> map_;
};

void to_json(nlohmann::json& j, const Attrs& a);
void from_json(const nlohmann::json& j, Attrs& a);

}  // namespace atl
