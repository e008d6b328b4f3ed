#include "backends/cuda/host_copy.h"

#include <cstdint>
#include <cstring>

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

}  // namespace atl::cuda
