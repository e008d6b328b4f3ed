#include "backends/cuda/doorbell.h"

#include "backends/cuda/cuda_check.h"

namespace atl::cuda {

namespace {

__global__ void doorbell_kernel(const volatile uint32_t* word, uint32_t token, int* flag, volatile uint32_t* rung) {
  // Each read crosses PCIe (about a microsecond), which paces the loop by itself.
  while (static_cast<int32_t>(*word - token) < 0) {
  }
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(flag), "r"(1) : "memory");
  if (rung != nullptr) {
    __threadfence_system();  // whoever sees the ring sees the flag's store before it
    *rung = token;
  }
}

}  // namespace

void load_doorbell_kernel() {
  // cudaFuncGetAttributes loads the function, as a launch would (io_convert.h, load_io_kernels).
  cudaFuncAttributes attributes{};
  ATL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, doorbell_kernel));
}

void launch_doorbell(const uint32_t* word, uint32_t token, int* flag, uint32_t* rung, cudaStream_t stream) {
  doorbell_kernel<<<1, 1, 0, stream>>>(word, token, flag, rung);
  ATL_CUDA_CHECK_LAUNCH("doorbell");
}

}  // namespace atl::cuda
