#include "backends/cuda/cuda_check.h"

#include "core/error.h"

namespace atl::cuda {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw Error(ErrorCode::kCuda, fmt::format("{} failed: {} ({})", call, cudaGetErrorString(err), cudaGetErrorName(err)),
              file, line);
}

void throw_launch_error(cudaError_t err, const char* kernel, const char* file, int line) {
  throw Error(ErrorCode::kCuda,
              fmt::format("launch of kernel '{}' failed: {} ({})", kernel, cudaGetErrorString(err),
                          cudaGetErrorName(err)),
              file, line);
}

void release_stream(cudaStream_t s) { cudaStreamDestroy(s); }
void release_event(cudaEvent_t e) { cudaEventDestroy(e); }
void release_graph_exec(cudaGraphExec_t g) { cudaGraphExecDestroy(g); }

Stream make_stream() {
  cudaStream_t s = nullptr;
  ATL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

Stream make_priority_stream(bool highest) {
  int least = 0, greatest = 0;
  ATL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  ATL_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, highest ? greatest : least));
  return Stream(s);
}

Event make_event(bool timing) {
  cudaEvent_t e = nullptr;
  ATL_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) ATL_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

PinnedBuffer::PinnedBuffer(size_t bytes, bool mapped, bool write_combined) : bytes_(bytes) {
  const unsigned flags =
      (mapped ? cudaHostAllocMapped : cudaHostAllocDefault) | (write_combined ? cudaHostAllocWriteCombined : 0u);
  if (bytes > 0) ATL_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, flags));
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

void* PinnedBuffer::device_alias() const {
  void* d = nullptr;
  ATL_CUDA_CHECK(cudaHostGetDevicePointer(&d, ptr_, 0));
  return d;
}

}  // namespace atl::cuda
