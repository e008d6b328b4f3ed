#pragma once
// GEMM choices found by load-time autotuning, remembered across processes so that a second load
// of the same model on the same device does not time anything again.
//
// One JSON file holds a section per device key (device, SM count, driver and runtime versions,
// the kernel set); each section maps a kernel's tune key (its full launch geometry, the same key
// instances share results by) to the chosen tile/split. Keys are geometries, not whole programs,
// so one model's tuning also serves every other model with the same layer shapes. A cached
// choice is used only while the kernel still offers it; anything else is timed as before.
#include <map>
#include <optional>
#include <string>

namespace atl::cuda {

class TuneCache {
 public:
  // An empty cache that save() writes to `path` ("" = never saved).
  TuneCache(std::string path, std::string device_key);

  // Reads `path`: a missing file is an empty cache; an unreadable or malformed one throws kIo /
  // kInvalidArgument naming the file (the caller warns and tunes without it).
  static TuneCache load(const std::string& path, const std::string& device_key);

  std::optional<std::string> find(const std::string& tune_key) const;
  void remember(const std::string& tune_key, const std::string& choice);
  bool dirty() const { return dirty_; }
  size_t size() const { return entries_.size(); }

  // Merges this device's entries over the file as it is now (other processes may have added
  // theirs) and replaces it atomically; throws kIo on failure.
  void save() const;

 private:
  std::string path_, device_key_;
  std::map<std::string, std::string> entries_;
  bool dirty_ = false;
};

// Where the cache lives: $ATOLL_TUNE_CACHE (a file; "off" = no cache, returned as ""), else
// $XDG_CACHE_HOME/atoll/gemm_choices.json, else $HOME/.cache/atoll/gemm_choices.json, else "".
std::string default_tune_cache_path();

}  // namespace atl::cuda
