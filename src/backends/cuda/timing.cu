// Helpers for measuring kernels in place: a device-side wait that lets the host queue work
// behind it (so timed launches run back to back, not at the host's enqueue rate), and a random
// fill that gives tuning runs realistic operands.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/timing.h"

namespace atl::cuda {

namespace {

__global__ void spin_kernel(uint64_t ns) {
  const uint64_t start = global_ns();
  while (global_ns() - start < ns) {
  }
}

constexpr uint64_t kGateTimeoutNs = 5'000'000'000;

__global__ void gate_kernel(const volatile int* word) {
  const uint64_t start = global_ns();
  while (*word == 0 && global_ns() - start < kGateTimeoutNs) {
  }
}

// Uniform values in [-1, 1) from a hash of the index: the same seed gives the same bytes.
__global__ void fill_random_kernel(__half* p, int n, uint32_t seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    p[i] = __float2half(static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

}  // namespace

void launch_spin(cudaStream_t stream, double microseconds) {
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(microseconds * 1000.0));
  ATL_CUDA_CHECK_LAUNCH("spin");
}

HostGate::HostGate() : word_(sizeof(int), /*mapped=*/true) {
  *static_cast<volatile int*>(word_.get()) = 0;
}

// Frees the word only once the gate kernel has seen it set.
HostGate::~HostGate() {
  release();
  cudaDeviceSynchronize();
}

void HostGate::hold(cudaStream_t stream) {
  *static_cast<volatile int*>(word_.get()) = 0;
  gate_kernel<<<1, 1, 0, stream>>>(static_cast<const int*>(word_.device_alias()));
  ATL_CUDA_CHECK_LAUNCH("gate");
}

void HostGate::release() {
  *static_cast<volatile int*>(word_.get()) = 1;
}

void launch_fill_random(void* halves, int64_t count, uint32_t seed, cudaStream_t stream) {
  // The arena may exceed the 32-bit index range: fill it in slices.
  constexpr int64_t kSlice = int64_t{1} << 30;
  for (int64_t done = kSlice; done < count; done += kSlice) {
    launch_fill_random(static_cast<__half*>(halves) + done, std::min(kSlice, count - done), seed + 1, stream);
  }
  count = std::min(count, kSlice);
  if (count <= 0) return;
  fill_random_kernel<<<blocks_for(count, 256), 256, 0, stream>>>(static_cast<__half*>(halves), static_cast<int>(count),
                                                                 seed);
  ATL_CUDA_CHECK_LAUNCH("fill_random");
}

}  // namespace atl::cuda
