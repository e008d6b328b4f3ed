// Softmax and LayerNorm: one warp per row, statistics in f32, the row re-read from cache rather
// than held in registers so that any row length works.
#include <cfloat>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }

// Rows along the last axis (inner == 1). T: __half, or float for a graph input's f32 copy.
template <typename T>
__global__ void softmax_rows_kernel(const T* __restrict__ xs, const SoftmaxArgs p, const int* flag) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * kWarpsPerBlock;
  ItemFlag checks(flag);
  for (int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5); row < p.outer; row += warps) {
    const int seen = checks.next();
    const T* x = xs + row * p.len;
    __half* y = p.y + row * p.len;
    float m = -FLT_MAX;
    for (int j = lane; j < p.len; j += 32) m = fmaxf(m, to_f32(x[j]));
    m = warp_max(m);
    if (__shfl_sync(0xffffffffu, seen, 0)) return;
    float sum = 0.0f;
    for (int j = lane; j < p.len; j += 32) sum += __expf(to_f32(x[j]) - m);
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < p.len; j += 32) y[j] = __float2half(__expf(to_f32(x[j]) - m) * inv);
  }
}

// Any other axis: one thread per (outer, inner) column.
template <typename T>
__global__ void softmax_strided_kernel(const T* __restrict__ xs, const SoftmaxArgs p, const int* flag) {
  const int total = p.outer * p.inner;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    if (checks.next()) return;
    const int o = i / p.inner, in = i - o * p.inner;
    const T* x = xs + o * p.len * p.inner + in;
    __half* y = p.y + o * p.len * p.inner + in;
    float m = -FLT_MAX;
    for (int j = 0; j < p.len; ++j) m = fmaxf(m, to_f32(x[j * p.inner]));
    float sum = 0.0f;
    for (int j = 0; j < p.len; ++j) sum += __expf(to_f32(x[j * p.inner]) - m);
    const float inv = 1.0f / sum;
    for (int j = 0; j < p.len; ++j) y[j * p.inner] = __float2half(__expf(to_f32(x[j * p.inner]) - m) * inv);
  }
}

__global__ void layer_norm_kernel(const LayerNormArgs p, const int* flag) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * kWarpsPerBlock;
  const float inv_d = 1.0f / static_cast<float>(p.d);
  ItemFlag checks(flag);
  for (int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5); row < p.rows; row += warps) {
    const int seen = checks.next();
    const __half* x = p.x + row * p.d;
    __half* y = p.y + row * p.d;
    float sum = 0.0f;
    for (int j = lane; j < p.d; j += 32) sum += __half2float(x[j]);
    const float mean = warp_sum(sum) * inv_d;
    // The row is read by now, with the flag; lane 0's copy makes the exit warp-uniform.
    if (__shfl_sync(0xffffffffu, seen, 0)) return;
    float sq = 0.0f;
    for (int j = lane; j < p.d; j += 32) {
      const float t = __half2float(x[j]) - mean;
      sq += t * t;
    }
    const float rstd = rsqrtf(warp_sum(sq) * inv_d + p.epsilon);
    for (int j = lane; j < p.d; j += 32) {
      y[j] = __float2half((__half2float(x[j]) - mean) * rstd * p.gamma[j] + p.beta[j]);
    }
  }
}

unsigned row_blocks(int64_t rows) {
  return blocks_for(rows, kWarpsPerBlock, kWarpsPerBlock * 32);
}

template <typename T>
void enqueue_softmax(const T* x, const SoftmaxArgs& p, cudaStream_t s, const int* flag) {
  if (p.inner == 1) {
    softmax_rows_kernel<<<row_blocks(p.outer), kWarpsPerBlock * 32, 0, s>>>(x, p, flag);
  } else {
    softmax_strided_kernel<<<blocks_for(p.outer * p.inner, 256), 256, 0, s>>>(x, p, flag);
  }
}

}  // namespace

void launch_softmax(const SoftmaxArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.x_f32 != nullptr) {
    enqueue_softmax(p.x_f32, p, s, flag);
  } else {
    enqueue_softmax(p.x, p, s, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_layer_norm(const LayerNormArgs& p, cudaStream_t s, const int* flag, const char* name) {
  layer_norm_kernel<<<row_blocks(p.rows), kWarpsPerBlock * 32, 0, s>>>(p, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
