#pragma once
// Host copies into staging memory the GPU reads next (request inputs): the destination is not
// read again by the host, so on x86-64 the copy uses non-temporal stores, which skip the cache
// and the read-for-ownership that ordinary stores pay on every destination line.
#include <cstddef>

namespace atl::cuda {

void copy_to_staging(void* dst, const void* src, size_t bytes);

}  // namespace atl::cuda
