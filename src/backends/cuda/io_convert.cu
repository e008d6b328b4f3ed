#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/io_convert.h"

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

__global__ void f32_to_storage_kernel(const float* src, __half* dst, const HalfStorage s, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = __float2half_rn(src[logical_index(i, s)]);
  }
}

__global__ void storage_to_f32_kernel(const __half* src, float* dst, const HalfStorage s, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[logical_index(i, s)] = __half2float(src[i]);
  }
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

void launch_f32_to_storage(const float* src, void* dst_half, const HalfStorage& s, cudaStream_t stream) {
  const int64_t total = total_of(s);
  if (total == 0) return;
  f32_to_storage_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(src, static_cast<__half*>(dst_half), s,
                                                                              total);
  ATL_CUDA_CHECK_LAUNCH("f32_to_storage");
}

void launch_storage_to_f32(const void* src_half, float* dst, const HalfStorage& s, cudaStream_t stream) {
  const int64_t total = total_of(s);
  if (total == 0) return;
  storage_to_f32_kernel<<<blocks_for(total, kThreads), kThreads, 0, stream>>>(static_cast<const __half*>(src_half), dst,
                                                                              s, total);
  ATL_CUDA_CHECK_LAUNCH("storage_to_f32");
}

}  // namespace atl::cuda
