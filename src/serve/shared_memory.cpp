#include "serve/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/text.h"

namespace atl::serve {

SharedMemoryRegion::SharedMemoryRegion(std::string name, std::string key, uint64_t offset, uint64_t byte_size)
    : name_(std::move(name)), key_(std::move(key)), offset_(offset), byte_size_(byte_size) {
  ATOLL_CHECK(!name_.empty(), kInvalidArgument, "a shared-memory region needs a name");
  ATOLL_CHECK(byte_size_ > 0, kInvalidArgument, "shared-memory region '{}' has byte_size 0", printable(name_));
  ATOLL_CHECK(offset_ <= UINT64_MAX - byte_size_, kInvalidArgument,
              "shared-memory region '{}': offset {} + byte_size {} overflows", printable(name_), offset_, byte_size_);
  const int fd = shm_open(key_.c_str(), O_RDWR, 0);
  ATOLL_CHECK(fd >= 0, kNotFound, "shared-memory region '{}': cannot open key '{}': {}", printable(name_),
              printable(key_), std::strerror(errno));
  struct stat st {};
  const bool sized = fstat(fd, &st) == 0;
  const uint64_t end = offset_ + byte_size_;
  if (!sized || static_cast<uint64_t>(st.st_size) < end) {
    close(fd);
    ATOLL_THROW(kInvalidArgument, "shared-memory region '{}': key '{}' holds {} bytes, the region ends at {}",
                printable(name_), printable(key_), sized ? static_cast<int64_t>(st.st_size) : -1, end);
  }
  mapped_bytes_ = static_cast<size_t>(end);
  mapping_ = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  close(fd);
  ATOLL_CHECK(mapping_ != MAP_FAILED, kIo, "shared-memory region '{}': mmap of key '{}' failed: {}", printable(name_),
              printable(key_), std::strerror(map_errno));
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (mapping_ != nullptr && mapping_ != MAP_FAILED) munmap(mapping_, mapped_bytes_);
}

std::span<std::byte> SharedMemoryRegion::bytes(uint64_t offset, uint64_t size) const {
  ATOLL_CHECK(offset <= byte_size_ && size <= byte_size_ - offset, kInvalidArgument,
              "shared-memory region '{}' holds {} bytes; {} bytes at offset {} do not fit", printable(name_),
              byte_size_, size, offset);
  return {static_cast<std::byte*>(mapping_) + offset_ + offset, static_cast<size_t>(size)};
}

void SharedMemoryRegistry::register_region(const std::string& name, const std::string& key, uint64_t offset,
                                           uint64_t byte_size) {
  auto region = std::make_shared<const SharedMemoryRegion>(name, key, offset, byte_size);
  std::lock_guard lock(mutex_);
  ATOLL_CHECK(!regions_.contains(name), kInvalidArgument, "shared-memory region '{}' is already registered",
              printable(name));
  regions_.emplace(name, std::move(region));
}

void SharedMemoryRegistry::unregister(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (name.empty()) {
    regions_.clear();
  } else {
    regions_.erase(name);
  }
}

std::vector<std::shared_ptr<const SharedMemoryRegion>> SharedMemoryRegistry::status(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const SharedMemoryRegion>> out;
  if (name.empty()) {
    for (const auto& [n, r] : regions_) out.push_back(r);
    return out;
  }
  const auto it = regions_.find(name);
  ATOLL_CHECK(it != regions_.end(), kNotFound, "no shared-memory region '{}' is registered", printable(name));
  out.push_back(it->second);
  return out;
}

std::shared_ptr<const SharedMemoryRegion> SharedMemoryRegistry::find(const std::string& name) const {
  return status(name).front();
}

SharedMemoryTensor SharedMemoryRegistry::tensor(const std::string& name, int64_t byte_size, int64_t offset,
                                                const std::string& what) const {
  ATOLL_CHECK(byte_size >= 0 && offset >= 0, kInvalidArgument,
              "tensor '{}': shared_memory_byte_size and shared_memory_offset must not be negative", printable(what));
  SharedMemoryTensor t{find(name), static_cast<uint64_t>(offset), static_cast<uint64_t>(byte_size)};
  t.bytes();  // checked now, before any work
  return t;
}

void SharedMemoryTensor::write(const std::string& output, std::span<const std::byte> data) const {
  ATOLL_CHECK(data.size() <= byte_size, kInvalidArgument,
              "output '{}' has {} bytes; its shared-memory region '{}' was given {}", printable(output), data.size(),
              printable(region->name()), byte_size);
  std::memcpy(region->bytes(offset, data.size()).data(), data.data(), data.size());
}

}  // namespace atl::serve
