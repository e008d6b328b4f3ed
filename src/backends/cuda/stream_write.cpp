#include "backends/cuda/stream_write.h"

#include <cuda.h>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

// cuStreamWriteValue32 through the runtime's driver entry point: linking libcuda directly would
// stop every binary from starting on machines without a driver (CI).
// cuStreamWriteValue32 and cuStreamWaitValue32 share this signature.
using StreamValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

StreamValue32 driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  ATL_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &status));
  ATOLL_CHECK(fn != nullptr && status == cudaDriverEntryPointSuccess, kCuda, "the driver has no {} (status {})", symbol,
              static_cast<int>(status));
  return reinterpret_cast<StreamValue32>(fn);
}

}  // namespace

void stream_write_value32(cudaStream_t stream, void* device_address, uint32_t value) {
  static const StreamValue32 write = driver_entry("cuStreamWriteValue32");
  const CUresult r = write(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_address), value,
                           CU_STREAM_WRITE_VALUE_DEFAULT);
  ATOLL_CHECK(r == CUDA_SUCCESS, kCuda, "cuStreamWriteValue32 failed with CUresult {}", static_cast<int>(r));
}

void stream_wait_value32_geq(cudaStream_t stream, const void* device_address, uint32_t value) {
  static const StreamValue32 wait = driver_entry("cuStreamWaitValue32");
  const CUresult r = wait(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_address), value,
                          CU_STREAM_WAIT_VALUE_GEQ);
  ATOLL_CHECK(r == CUDA_SUCCESS, kCuda, "cuStreamWaitValue32 failed with CUresult {}", static_cast<int>(r));
}

}  // namespace atl::cuda
