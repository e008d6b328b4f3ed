// Elementwise kernels: activations, broadcasting Add / Mul, per-channel ScaleShift. Each has an
// 8-wide vector path for the common aligned case and a scalar path for everything else.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void unary_vec_kernel(const __half* x, __half* y, int n8, int act, const int* flag) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    int stop = flag_peek(flag, i < gridDim.x * blockDim.x);
    float v[8];
    load8(x + i * 8, v);
    after_loads(stop, v[0]);
    if (stop) return;
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = apply_act(v[j], act);
    store8(y + i * 8, v);
  }
}

__global__ void unary_kernel(const __half* x, __half* y, int n, int act, const int* flag) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (entry_preempted(flag, i < gridDim.x * blockDim.x)) return;
    y[i] = __float2half(apply_act(__half2float(x[i]), act));
  }
}

__global__ void binary_same_vec_kernel(const BinaryArgs p, const int* flag) {
  const int n8 = p.n / 8;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    int stop = flag_peek(flag, i < gridDim.x * blockDim.x);
    float a[8], b[8];
    load8(p.a + i * 8, a);
    load8(p.b + i * 8, b);
    after_loads(stop, a[0] + b[0]);
    if (stop) return;
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = apply_act(p.is_mul ? a[j] * b[j] : a[j] + b[j], p.act);
    store8(p.y + i * 8, a);
  }
}

__global__ void binary_kernel(const BinaryArgs p, const int* flag) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    if (entry_preempted(flag, i < gridDim.x * blockDim.x)) return;
    int rem = i, ai = 0, bi = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int coord = rem % p.out_dims[d];
      rem /= p.out_dims[d];
      ai += coord * p.a_strides[d];
      bi += coord * p.b_strides[d];
    }
    const float a = __half2float(p.a[ai]), b = __half2float(p.b[bi]);
    p.y[i] = __float2half(apply_act(p.is_mul ? a * b : a + b, p.act));
  }
}

// Channels last (inner == 1) and a multiple of 8: the 8 elements of a vector are 8 consecutive
// channels, so their scales and shifts are two 16-byte loads each.
__global__ void scale_shift_channels_last_kernel(const ScaleShiftArgs p, const int* flag) {
  const int n8 = p.n / 8;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    int stop = flag_peek(flag, i < gridDim.x * blockDim.x);
    const int c = (i * 8) % p.channels;
    float v[8];
    load8(p.x + i * 8, v);
    const float4* sc = reinterpret_cast<const float4*>(p.scale + c);
    const float4* sh = reinterpret_cast<const float4*>(p.shift + c);
    const float4 s0 = sc[0], s1 = sc[1], h0 = sh[0], h1 = sh[1];
    after_loads(stop, v[0] + s0.x + h0.x);
    if (stop) return;
    const float s[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    const float h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = apply_act(fmaf(v[j], s[j], h[j]), p.act);
    store8(p.y + i * 8, v);
  }
}

__global__ void scale_shift_kernel(const ScaleShiftArgs p, const int* flag) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    if (entry_preempted(flag, i < gridDim.x * blockDim.x)) return;
    const int c = (i / p.inner) % p.channels;
    p.y[i] = __float2half(apply_act(fmaf(__half2float(p.x[i]), p.scale[c], p.shift[c]), p.act));
  }
}

bool aligned_host(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

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
  if (p.inner == 1 && p.channels % 8 == 0 && aligned_host(p.x) && aligned_host(p.y) && aligned_host(p.scale) &&
      aligned_host(p.shift)) {
    scale_shift_channels_last_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p, flag);
  } else {
    scale_shift_kernel<<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
