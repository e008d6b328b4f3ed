#pragma once
// The readers under fuzz take file paths, as users give them: each input is written to a
// per-process file in memory-backed /dev/shm (or the temporary folder) first.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace atl::fuzz {

inline std::string input_file(const uint8_t* data, size_t size, const char* extension) {
  const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                         : std::filesystem::temp_directory_path();
  const std::string path = (dir / ("atoll_fuzz_" + std::to_string(getpid()) + extension)).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

}  // namespace atl::fuzz
