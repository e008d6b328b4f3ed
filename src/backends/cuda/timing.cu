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
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

constexpr uint64_t kGateTimeoutNs = 5'000'000'000;

__global__ void gate_kernel(const volatile int* word) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (*word == 0 && now - start < kGateTimeoutNs);
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

HostGate::HostGate() {
  ATL_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&word_), sizeof(int), cudaHostAllocMapped));
  *reinterpret_cast<volatile int*>(word_) = 0;
  void* dev = nullptr;
  ATL_CUDA_CHECK(cudaHostGetDevicePointer(&dev, word_, 0));
  word_device_ = static_cast<int*>(dev);
}

HostGate::~HostGate() {
  if (word_ != nullptr) {
    release();
    cudaFreeHost(word_);  // no throw in a destructor; freeing waits for the device
  }
}

void HostGate::hold(cudaStream_t stream) {
  *reinterpret_cast<volatile int*>(word_) = 0;
  gate_kernel<<<1, 1, 0, stream>>>(word_device_);
  ATL_CUDA_CHECK_LAUNCH("gate");
}

void HostGate::release() {
  *reinterpret_cast<volatile int*>(word_) = 1;
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
