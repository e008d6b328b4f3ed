#pragma once
// Measurement helpers of the CUDA backend (timing.cu).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace atl::cuda {

// Occupies the stream for about `microseconds` of device time.
void launch_spin(cudaStream_t stream, double microseconds);
// Fills `count` halves with uniform values in [-1, 1) derived from `seed`.
void launch_fill_random(void* halves, int64_t count, uint32_t seed, cudaStream_t stream);

}  // namespace atl::cuda
