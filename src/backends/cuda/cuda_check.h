#pragma once
// Checked CUDA calls and RAII handles. Every runtime call goes through ATL_CUDA_CHECK, every
// kernel launch is followed by ATL_CUDA_CHECK_LAUNCH; both throw atl::Error(kCuda) naming the
// call (or kernel), file and line. This header stays free of fmt so that .cu files can use it.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace atl::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_launch_error(cudaError_t err, const char* kernel, const char* file, int line);

}  // namespace atl::cuda

#define ATL_CUDA_CHECK(call)                                                                                   \
  do {                                                                                                         \
    const cudaError_t atl_cuda_err_ = (call);                                                                  \
    if (atl_cuda_err_ != cudaSuccess) ::atl::cuda::throw_cuda_error(atl_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After every <<<>>>: a bad configuration or a missing kernel image shows up here, at once.
#define ATL_CUDA_CHECK_LAUNCH(kernel_name)                                                                             \
  do {                                                                                                                 \
    const cudaError_t atl_cuda_err_ = cudaGetLastError();                                                              \
    if (atl_cuda_err_ != cudaSuccess) ::atl::cuda::throw_launch_error(atl_cuda_err_, kernel_name, __FILE__, __LINE__); \
  } while (0)

namespace atl::cuda {

// Move-only owner of one resource, released with `Deleter` (tiny-cuda-nn style handles).
template <typename T, void (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (h_) Release(std::exchange(h_, T{}));
  }
  T get() const { return h_; }
  explicit operator bool() const { return h_ != T{}; }

 private:
  T h_{};
};

// Release functions ignore errors: they run in destructors, possibly during unwinding.
void release_stream(cudaStream_t s);
void release_event(cudaEvent_t e);
void release_graph_exec(cudaGraphExec_t g);

using Stream = Handle<cudaStream_t, release_stream>;
using Event = Handle<cudaEvent_t, release_event>;
using GraphExec = Handle<cudaGraphExec_t, release_graph_exec>;

// Hardware queues the GPU spreads streams over (CUDA_DEVICE_MAX_CONNECTIONS; atoll asks for the
// maximum, 32, unless the user set it). Streams sharing a queue run in submission order, so
// work held on one (StreamGate) delays the others.
int hardware_queues();
Stream make_stream();  // non-blocking w.r.t. the legacy default stream
// Non-blocking too, at the device's highest stream priority or its lowest.
Stream make_priority_stream(bool highest);
Event make_event(bool timing = false);  // timing events cost more to record; only timers ask for them

// Device memory from cudaMalloc (never managed memory).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();

  void* get() const { return ptr_; }
  std::byte* bytes_ptr() const { return static_cast<std::byte*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory: asynchronous copies need it, and kernels may write it when mapped.
// Write-combined memory skips the host's caches (host reads crawl); atoll_bench_staging compares it.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t bytes, bool mapped, bool write_combined = false);
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  ~PinnedBuffer();

  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }
  void* device_alias() const;  // the device address of mapped memory

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace atl::cuda
