#pragma once
// Triton's system shared-memory extension: a client registers a POSIX shared-memory object
// (shm_open key, offset, byte size) under a name, then names that region in inference requests
// instead of carrying the tensor bytes in the message: on loopback a 602 KB image then costs the
// server one read of mapped memory instead of the protocol's copies and transport.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace atl::serve {

// One registered region, mapped for as long as a request or the registry holds it.
class SharedMemoryRegion {
 public:
  SharedMemoryRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size);
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }
  // Bytes [offset, offset + size) of the region (offsets relative to the registered offset);
  // a range past the region is an error naming it.
  std::span<std::byte> bytes(uint64_t offset, uint64_t size) const;

 private:
  std::string name_, key_;
  uint64_t offset_ = 0, byte_size_ = 0;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
};

// A tensor in a registered region: the request parameters shared_memory_region,
// shared_memory_byte_size and shared_memory_offset, resolved. Holding it keeps the region mapped.
struct SharedMemoryTensor {
  std::shared_ptr<const SharedMemoryRegion> region;
  uint64_t offset = 0, byte_size = 0;
  std::span<std::byte> bytes() const { return region->bytes(offset, byte_size); }
  // Copies an output's bytes into the tensor's place; more bytes than it was given is an error.
  void write(const std::string& output, std::span<const std::byte> data) const;
};

class SharedMemoryRegistry {
 public:
  // Maps the object now, so a missing key or a region past the object's end is reported here.
  void register_region(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // "" unregisters every region; an unknown name is not an error (as Triton).
  void unregister(const std::string& name);
  // Every region, or the one named ("" for all); an unknown name is kNotFound.
  std::vector<std::shared_ptr<const SharedMemoryRegion>> status(const std::string& name) const;
  std::shared_ptr<const SharedMemoryRegion> find(const std::string& name) const;
  // The tensor a request's parameters place in region `name` (checked against the region).
  SharedMemoryTensor tensor(const std::string& name, int64_t byte_size, int64_t offset, const std::string& what) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_;
};

}  // namespace atl::serve
