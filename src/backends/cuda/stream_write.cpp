#include "backends/cuda/stream_write.h"

#include <cuda.h>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

// cuStreamWriteValue32 through the runtime's driver entry point: linking libcuda directly would
// stop every binary from starting on machines without a driver (CI).
using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

WriteValue32 write_value32_entry() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  ATL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &status));
  ATOLL_CHECK(fn != nullptr && status == cudaDriverEntryPointSuccess, kCuda,
              "the driver has no cuStreamWriteValue32 (status {})", static_cast<int>(status));
  return reinterpret_cast<WriteValue32>(fn);
}

}  // namespace

void stream_write_value32(cudaStream_t stream, void* device_address, uint32_t value) {
  static const WriteValue32 write = write_value32_entry();
  const CUresult r = write(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_address), value,
                           CU_STREAM_WRITE_VALUE_DEFAULT);
  ATOLL_CHECK(r == CUDA_SUCCESS, kCuda, "cuStreamWriteValue32 failed with CUresult {}", static_cast<int>(r));
}

}  // namespace atl::cuda
