#include "backends/cuda/host_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace atl::cuda {

void copy_to_staging(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // Below a few pages the cache is the faster place to leave the data.
  constexpr size_t kStreamingFrom = 16 * 1024;
  if (bytes >= kStreamingFrom) {
    const size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    const size_t vectors = bytes / 16;
    auto* out = reinterpret_cast<__m128i*>(d);
    const auto* in = reinterpret_cast<const __m128i*>(s);
    for (size_t i = 0; i < vectors; ++i) _mm_stream_si128(out + i, _mm_loadu_si128(in + i));
    _mm_sfence();  // streaming stores are weakly ordered: done before the upload is released
    d += vectors * 16;
    s += vectors * 16;
    bytes -= vectors * 16;
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

ParallelStagingCopy::ParallelStagingCopy(int threads) {
  ATOLL_CHECK(threads >= 1 && threads <= 16, kInvalidArgument, "staging copy threads must be 1..16 (got {})", threads);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ParallelStagingCopy::~ParallelStagingCopy() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

namespace {
// Part `index` of `parts` of [0, bytes), split at 64-byte boundaries so no two threads' streaming
// stores share a cache line.
std::pair<size_t, size_t> part(size_t bytes, int index, int parts) {
  const size_t lines = (bytes + 63) / 64;
  const auto at = [&](int i) { return std::min(bytes, lines * static_cast<size_t>(i) / static_cast<size_t>(parts) * 64); };
  return {at(index), at(index + 1)};
}
}  // namespace

void ParallelStagingCopy::copy(void* dst, const void* src, size_t bytes) {
  if (workers_.empty() || bytes < kSplitFrom) {
    copy_to_staging(dst, src, bytes);
    return;
  }
  std::lock_guard lock(callers_);
  dst_ = static_cast<std::byte*>(dst);
  src_ = static_cast<const std::byte*>(src);
  bytes_ = bytes;
  remaining_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes the job
  generation_.notify_all();
  const auto [from, to] = part(bytes, 0, threads());
  copy_to_staging(dst_ + from, src_ + from, to - from);
  // The workers take a few microseconds to wake; spinning keeps the caller's answer prompt.
  while (remaining_.load(std::memory_order_acquire) != 0) {
#if defined(__x86_64__)
    _mm_pause();
#endif
  }
}

void ParallelStagingCopy::work(int index) {
  uint64_t seen = 0;
  for (;;) {
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    const auto [from, to] = part(bytes_, index, threads());
    copy_to_staging(dst_ + from, src_ + from, to - from);  // ends with a store fence
    remaining_.fetch_sub(1, std::memory_order_release);
  }
}

ParallelStagingCopy& staging_copier() {
  static ParallelStagingCopy copier([] {
    const char* env = std::getenv("ATOLL_STAGING_THREADS");
    if (env == nullptr || *env == '\0') return 1;
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    ATOLL_CHECK(*end == '\0' && n >= 1 && n <= 16, kInvalidArgument,
                "ATOLL_STAGING_THREADS must be a whole number 1..16 (got '{}')", env);
    return static_cast<int>(n);
  }());
  return copier;
}

}  // namespace atl::cuda
