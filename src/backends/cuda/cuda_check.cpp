#include "backends/cuda/cuda_check.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace atl::cuda {

namespace {

// The GPU runs each stream's work in order on one of a few hardware queues; streams beyond
// their number share queues, and work held on one stream (StreamGate) then holds up the others
// on its queue. CUDA reads this before it creates a context, so it is set at program start,
// before main, unless the user chose a value. 32 is CUDA's maximum.
constexpr int kDefaultHardwareQueues = 8;
constexpr int kMaxHardwareQueues = 32;
const bool kQueuesSet = [] { return setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0) == 0; }();

}  // namespace

int hardware_queues() {
  const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (env == nullptr || *env == '\0') return kQueuesSet ? kMaxHardwareQueues : kDefaultHardwareQueues;
  const int n = std::atoi(env);
  return n < 1 ? kDefaultHardwareQueues : std::min(n, kMaxHardwareQueues);
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw Error(ErrorCode::kCuda, fmt::format("{} failed: {} ({})", call, cudaGetErrorString(err), cudaGetErrorName(err)),
              file, line);
}

void throw_launch_error(cudaError_t err, const char* kernel, const char* file, int line) {
  throw Error(
      ErrorCode::kCuda,
      fmt::format("launch of kernel '{}' failed: {} ({})", kernel, cudaGetErrorString(err), cudaGetErrorName(err)),
      file, line);
}

void release_stream(cudaStream_t s) {
  cudaStreamDestroy(s);
}
void release_event(cudaEvent_t e) {
  cudaEventDestroy(e);
}
void release_graph_exec(cudaGraphExec_t g) {
  cudaGraphExecDestroy(g);
}

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
