#include "backends/cuda/doorbell.h"

#include "backends/cuda/cuda_check.h"

namespace atl::cuda {

namespace {

__global__ void doorbell_kernel(const volatile uint32_t* word, uint32_t token, int* flag) {
  // Each read crosses PCIe (about a microsecond), which paces the loop by itself.
  while (static_cast<int32_t>(*word - token) < 0) {
  }
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(flag), "r"(1) : "memory");
}

}  // namespace

void launch_doorbell(const uint32_t* word, uint32_t token, int* flag, cudaStream_t stream) {
  doorbell_kernel<<<1, 1, 0, stream>>>(word, token, flag);
  ATL_CUDA_CHECK_LAUNCH("doorbell");
}

}  // namespace atl::cuda
