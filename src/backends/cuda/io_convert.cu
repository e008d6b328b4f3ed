#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/io_convert.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

constexpr int kThreads = 256;

// One thread per stored element, so the f16 writes (the larger side for NHWC's C=3 images) and
// the f32 reads both stay within a few cache lines per warp.
__device__ inline int64_t logical_index(int64_t stored, const HalfStorage& s) {
  if (!s.nhwc) return stored;
  const int64_t c = stored % s.channels;
  const int64_t rest = stored / s.channels;
  const int64_t p = rest % s.pixels;
  const int64_t n = rest / s.pixels;
  return (n * s.channels + c) * s.pixels + p;
}

// With a flag (a BE upload), each element tests the flag read during the one before: a batch-32
// image is 19 MB, tens of microseconds that an RT request would otherwise wait behind.
__global__ void f32_to_storage_kernel(const float* src, __half* dst, const HalfStorage s, int64_t total,
                                      const int* flag) {
  ItemFlag checks(flag);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int stop = checks.next();
    const float v = src[logical_index(i, s)];
    if (seen_after(stop, v)) return;
    dst[i] = __float2half_rn(v);
  }
}

__global__ void storage_to_f32_kernel(const __half* src, float* dst, const HalfStorage s, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[logical_index(i, s)] = __half2float(src[i]);
  }
}

// 16 bytes per thread per step: one PCIe round trip is ~1-2 us, so the copy's speed is the bytes
// in flight, and a grid of a few hundred blocks keeps hundreds of KB in flight.
// With a flag (a BE upload), each step tests the flag read during the step before, or with
// kFresh the one read beside its own PCIe read: the test waits for the step's data either way,
// and the flag's L2 read is far shorter than the PCIe one, so the fresher value costs nothing.
template <bool kFresh>
__global__ void sm_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t words,
                               const unsigned char* __restrict__ tail_src, unsigned char* __restrict__ tail_dst,
                               int tail, const int* flag) {
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  ItemFlag checks(kFresh ? nullptr : flag);
  for (size_t i = first; i < words; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int stop = kFresh ? (flag != nullptr ? load_flag(flag) : 0) : checks.next();
    const uint4 v = src[i];
    if (seen_after(stop, v.x)) return;
    dst[i] = v;
  }
  if (first < static_cast<size_t>(tail)) tail_dst[first] = tail_src[first];
}

int64_t total_of(const HalfStorage& s) {
  return s.outer * s.channels * s.pixels;
}

}  // namespace

HalfStorage half_storage(const TensorSpec& spec) {
  HalfStorage s;
  s.outer = spec.shape.numel();
  if (spec.layout == Layout::kNHWC && spec.shape.rank() == 4) {
    s.outer = spec.shape[0];
    s.channels = spec.shape[1];
    s.pixels = spec.shape[2] * spec.shape[3];
    s.nhwc = true;
  }
  return s;
}

void launch_f32_to_storage(const float* src, void* dst_half, const HalfStorage& s, cudaStream_t stream,
                           const int* flag) {
  const int64_t total = total_of(s);
  if (total == 0) return;
  f32_to_storage_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(src, static_cast<__half*>(dst_half), s,
                                                                              total, flag);
  ATL_CUDA_CHECK_LAUNCH("f32_to_storage");
}

void launch_storage_to_f32(const void* src_half, float* dst, const HalfStorage& s, cudaStream_t stream) {
  const int64_t total = total_of(s);
  if (total == 0) return;
  storage_to_f32_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(static_cast<const __half*>(src_half), dst,
                                                                              s, total);
  ATL_CUDA_CHECK_LAUNCH("storage_to_f32");
}

void load_io_kernels() {
  // cudaFuncGetAttributes loads the function, as a launch would.
  cudaFuncAttributes attributes{};
  ATL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, f32_to_storage_kernel));
  ATL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, storage_to_f32_kernel));
  ATL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, sm_copy_kernel<false>));
  ATL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, sm_copy_kernel<true>));
}

void launch_sm_copy(const void* src, void* dst, size_t bytes, cudaStream_t stream, const int* flag,
                    int max_blocks, bool fresh_flag) {
  ATOLL_CHECK(reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0, kInternal,
              "SM copies need 16-byte aligned pointers");
  ATOLL_CHECK(max_blocks >= 1, kInternal, "an SM copy needs at least one block, got {}", max_blocks);
  if (bytes == 0) return;
  const size_t words = bytes / 16;
  const int tail = static_cast<int>(bytes % 16);
  const int64_t blocks = std::clamp<int64_t>(static_cast<int64_t>((words + kThreads - 1) / kThreads), 1, max_blocks);
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  // A copy with no flag (an RT upload, a timing run) has no flag to read fresh.
  const auto kernel = fresh_flag && flag != nullptr ? sm_copy_kernel<true> : sm_copy_kernel<false>;
  kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(src), static_cast<uint4*>(dst), words, s + words * 16, d + words * 16, tail, flag);
  ATL_CUDA_CHECK_LAUNCH("sm_copy");
}

}  // namespace atl::cuda
