#pragma once
// Measurement helpers of the CUDA backend (timing.cu).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"

namespace atl::cuda {

// Occupies the stream for about `microseconds` of device time.
void launch_spin(cudaStream_t stream, double microseconds);
// Holds streams until release(): hold() enqueues a one-thread kernel that spins on a mapped
// host word, so everything enqueued behind it runs back to back however long the host took to
// enqueue it (launches with per-kernel attributes can take longer than any fixed device wait).
// The kernel gives up after a few seconds so that a host that never releases cannot hang the GPU.
class HostGate {
 public:
  HostGate();
  HostGate(const HostGate&) = delete;
  HostGate& operator=(const HostGate&) = delete;
  ~HostGate();
  void hold(cudaStream_t stream);
  void release();

 private:
  PinnedBuffer word_;  // mapped: one int
};

// Fills `count` halves with uniform values in [-1, 1) derived from `seed`.
void launch_fill_random(void* halves, int64_t count, uint32_t seed, cudaStream_t stream);

}  // namespace atl::cuda
