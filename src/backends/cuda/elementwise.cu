// Elementwise kernels: activations, broadcasting Add / Mul, per-channel ScaleShift. Each has an
// 8-wide vector path for the common aligned case and a scalar path for everything else.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void unary_vec_kernel(const __half* x, __half* y, int64_t n8, int act, const int* flag) {
  if (thread_preempted(flag)) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[8];
    load8(x + i * 8, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = apply_act(v[j], act);
    store8(y + i * 8, v);
  }
}

__global__ void unary_kernel(const __half* x, __half* y, int64_t n, int act, const int* flag) {
  if (thread_preempted(flag)) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2half(apply_act(__half2float(x[i]), act));
  }
}

__global__ void binary_same_vec_kernel(const BinaryArgs p, const int* flag) {
  if (thread_preempted(flag)) return;
  const int64_t n8 = p.n / 8;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float a[8], b[8];
    load8(p.a + i * 8, a);
    load8(p.b + i * 8, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = apply_act(p.is_mul ? a[j] * b[j] : a[j] + b[j], p.act);
    store8(p.y + i * 8, a);
  }
}

__global__ void binary_kernel(const BinaryArgs p, const int* flag) {
  if (thread_preempted(flag)) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, ai = 0, bi = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t coord = rem % p.out_dims[d];
      rem /= p.out_dims[d];
      ai += coord * p.a_strides[d];
      bi += coord * p.b_strides[d];
    }
    const float a = __half2float(p.a[ai]), b = __half2float(p.b[bi]);
    p.y[i] = __float2half(apply_act(p.is_mul ? a * b : a + b, p.act));
  }
}

__global__ void scale_shift_vec_kernel(const ScaleShiftArgs p, const int* flag) {
  if (thread_preempted(flag)) return;
  const int64_t n8 = p.n / 8;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[8];
    load8(p.x + i * 8, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t c = ((i * 8 + j) / p.inner) % p.channels;
      v[j] = apply_act(fmaf(v[j], p.scale[c], p.shift[c]), p.act);
    }
    store8(p.y + i * 8, v);
  }
}

__global__ void scale_shift_kernel(const ScaleShiftArgs p, const int* flag) {
  if (thread_preempted(flag)) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / p.inner) % p.channels;
    p.y[i] = __float2half(apply_act(fmaf(__half2float(p.x[i]), p.scale[c], p.shift[c]), p.act));
  }
}

bool aligned_host(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

void launch_unary(const UnaryArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.n % 8 == 0 && aligned_host(p.x) && aligned_host(p.y)) {
    unary_vec_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p.x, p.y, p.n / 8, p.act, flag);
  } else {
    unary_kernel<<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p.x, p.y, p.n, p.act, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_binary(const BinaryArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.same_shape && p.n % 8 == 0 && aligned_host(p.a) && aligned_host(p.b) && aligned_host(p.y)) {
    binary_same_vec_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p, flag);
  } else {
    binary_kernel<<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_scale_shift(const ScaleShiftArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.n % 8 == 0 && aligned_host(p.x) && aligned_host(p.y)) {
    scale_shift_vec_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p, flag);
  } else {
    scale_shift_kernel<<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
