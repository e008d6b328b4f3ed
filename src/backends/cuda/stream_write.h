#pragma once
// Device writes ordered on a stream, the cheapest way to raise a preemption flag or to report a
// launch's end: measured on the H200, cuStreamWriteValue32 on the RT stream and then the RT kernel
// finished 28.7 us after a GPU full of polling BE blocks was told to stop; an async copy on a
// control stream took 34 us.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace atl::cuda {

// Writes `value` to `device_address` (device memory or a mapped host allocation's device alias)
// once the work queued on `stream` before it has ended. Throws atl::Error(kCuda).
void stream_write_value32(cudaStream_t stream, void* device_address, uint32_t value);

// Holds back the work queued on `stream` after it until the 32-bit word at `device_address`
// (device memory or a mapped host allocation's device alias) is >= `value`: work can be enqueued
// before the event that releases it, which is then one host store. Throws atl::Error(kCuda).
void stream_wait_value32_geq(cudaStream_t stream, const void* device_address, uint32_t value);

}  // namespace atl::cuda
