#include "backends/cuda/tune_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

constexpr int kFormat = 1;

// The whole document at `path`, or an empty one when the file does not exist.
nlohmann::json read_document(const std::string& path) {
  if (path.empty() || !std::filesystem::exists(path)) return {{"format", kFormat}, {"devices", nlohmann::json::object()}};
  std::ifstream in(path);
  ATOLL_CHECK(in, kIo, "cannot read the GEMM tuning cache '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  ATOLL_CHECK(doc.is_object() && doc.value("format", 0) == kFormat && doc.contains("devices") &&
                  doc["devices"].is_object(),
              kInvalidArgument, "the GEMM tuning cache '{}' is not a format-{} cache (delete it to start afresh)",
              path, kFormat);
  return doc;
}

}  // namespace

TuneCache::TuneCache(std::string path, std::string device_key)
    : path_(std::move(path)), device_key_(std::move(device_key)) {}

TuneCache TuneCache::load(const std::string& path, const std::string& device_key) {
  TuneCache cache(path, device_key);
  const nlohmann::json doc = read_document(path);
  const auto it = doc["devices"].find(device_key);
  if (it == doc["devices"].end()) return cache;
  ATOLL_CHECK(it->is_object(), kInvalidArgument, "the GEMM tuning cache '{}' has a malformed section for '{}'", path,
              device_key);
  for (const auto& [key, choice] : it->items()) {
    ATOLL_CHECK(choice.is_string(), kInvalidArgument, "the GEMM tuning cache '{}' holds a non-string choice", path);
    cache.entries_[key] = choice.get<std::string>();
  }
  return cache;
}

std::optional<std::string> TuneCache::find(const std::string& tune_key) const {
  const auto it = entries_.find(tune_key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TuneCache::remember(const std::string& tune_key, const std::string& choice) {
  auto [it, added] = entries_.try_emplace(tune_key, choice);
  if (!added && it->second == choice) return;
  it->second = choice;
  dirty_ = true;
}

void TuneCache::save() const {
  if (path_.empty()) return;
  nlohmann::json doc;
  try {
    doc = read_document(path_);
  } catch (const Error&) {
    doc = read_document("");  // a malformed file is replaced, not merged
  }
  nlohmann::json& section = doc["devices"][device_key_];
  if (!section.is_object()) section = nlohmann::json::object();
  for (const auto& [key, choice] : entries_) section[key] = choice;
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  ATOLL_CHECK(!ec, kIo, "cannot create '{}' for the GEMM tuning cache: {}", parent.string(), ec.message());
  write_file_atomic(path_, doc.dump(1) + "\n");
}

std::string default_tune_cache_path() {
  if (const char* env = std::getenv("ATOLL_TUNE_CACHE"); env != nullptr && *env != '\0') {
    return std::string(env) == "off" ? std::string() : std::string(env);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (std::filesystem::path(xdg) / "atoll" / "gemm_choices.json").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (std::filesystem::path(home) / ".cache" / "atoll" / "gemm_choices.json").string();
  }
  return "";
}

}  // namespace atl::cuda
