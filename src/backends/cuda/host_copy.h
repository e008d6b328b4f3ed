#pragma once
// Host copies into staging memory the GPU reads next (request inputs): the destination is not
// read again by the host, so on x86-64 the copy uses non-temporal stores, which skip the cache
// and the read-for-ownership that ordinary stores pay on every destination line.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace atl::cuda {

void copy_to_staging(void* dst, const void* src, size_t bytes);

// copy_to_staging split across `threads` threads, the caller included, for request inputs large
// enough that one core's copy is most of an RT arrival's host time (602 KB: 35-60 us on the
// H200 machines). The other threads sleep on a futex between copies and are woken per copy.
// Copies from several threads take turns.
class ParallelStagingCopy {
 public:
  explicit ParallelStagingCopy(int threads);
  ~ParallelStagingCopy();
  ParallelStagingCopy(const ParallelStagingCopy&) = delete;
  ParallelStagingCopy& operator=(const ParallelStagingCopy&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Below `kSplitFrom` bytes, or with one thread, the caller copies alone.
  void copy(void* dst, const void* src, size_t bytes);
  static constexpr size_t kSplitFrom = 256 * 1024;

 private:
  void work(int index);

  std::mutex callers_;
  std::vector<std::thread> workers_;
  std::byte* dst_ = nullptr;
  const std::byte* src_ = nullptr;
  size_t bytes_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped per split copy, and at destruction
  std::atomic<int> remaining_{0};        // workers not yet done with the current copy
  bool stop_ = false;
};

// The process's copier for request inputs: ATOLL_STAGING_THREADS threads (default 1: the caller
// alone, until the split is measured on the GPU machines; at most 16).
ParallelStagingCopy& staging_copier();

}  // namespace atl::cuda
