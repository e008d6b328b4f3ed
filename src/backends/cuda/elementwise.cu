// Elementwise kernels: activations and unary math (Sigmoid, HardSigmoid, HardSwish, Erf, Sqrt,
// Clip), broadcasting Add / Sub / Mul / Div / Pow, per-channel ScaleShift. Each has an 8-wide
// vector path for the common aligned case and a scalar path for everything else.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

constexpr int kThreads = 256;

// Comparisons written so that NaN fails them and passes through (as the CPU backend's).
__device__ __forceinline__ float clamp_keep_nan(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

__device__ __forceinline__ float apply_unary(float v, const UnaryArgs& p) {
  switch (p.op) {
    case kUnarySigmoid: return 1.0f / (1.0f + expf(-v));
    case kUnaryHardSigmoid: return clamp_keep_nan(p.a * v + p.b, 0.0f, 1.0f);
    case kUnaryHardSwish: return v * clamp_keep_nan(v / 6.0f + 0.5f, 0.0f, 1.0f);
    case kUnaryErf: return erff(v);
    case kUnarySqrt: return sqrtf(v);
    case kUnaryClip: return clamp_keep_nan(v, p.a, p.b);
    default: return apply_act(v, p.act);
  }
}

__device__ __forceinline__ float apply_binary(float a, float b, int op, int act) {
  float v;
  switch (op) {
    case kBinarySub: v = a - b; break;
    case kBinaryMul: v = a * b; break;
    case kBinaryDiv: v = a / b; break;
    case kBinaryPow: v = powf(a, b); break;
    default: v = a + b; break;
  }
  return apply_act(v, act);
}

__global__ void unary_vec_kernel(const UnaryArgs p, const int* flag) {
  const int n8 = p.n / 8;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    float v[8];
    load8(p.x + i * 8, v);
    if (seen_after(stop, v[0])) return;
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = apply_unary(v[j], p);
    store8(p.y + i * 8, v);
  }
}

__global__ void unary_kernel(const UnaryArgs p, const int* flag) {
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    if (checks.next()) return;
    p.y[i] = __float2half(apply_unary(__half2float(p.x[i]), p));
  }
}

__global__ void binary_same_vec_kernel(const BinaryArgs p, const int* flag) {
  const int n8 = p.n / 8;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    float a[8], b[8];
    load8(p.a + i * 8, a);
    load8(p.b + i * 8, b);
    if (seen_after(stop, __float_as_uint(a[0]) ^ __float_as_uint(b[0]))) return;
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = apply_binary(a[j], b[j], p.op, p.act);
    store8(p.y + i * 8, a);
  }
}

// Element offsets in a and b of output element i.
__device__ __forceinline__ void broadcast_offsets(const BinaryArgs& p, int i, int& ai, int& bi) {
  int rem = i;
  ai = 0;
  bi = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int coord = rem % p.out_dims[d];
    rem /= p.out_dims[d];
    ai += coord * p.a_strides[d];
    bi += coord * p.b_strides[d];
  }
}

// Eight elements of an operand whose innermost stride is 1 (a 16-byte load) or 0 (one value).
__device__ __forceinline__ void load8_or_splat(const __half* x, bool splat, float (&v)[8]) {
  if (splat) {
    const float s = __half2float(*x);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = s;
  } else {
    load8(x, v);
  }
}

// Broadcasting with an innermost output extent that is a multiple of 8 and operands that either
// run along it (stride 1) or repeat one value across it (stride 0): 8 outputs share every outer
// coordinate, so one index computation serves them all.
__global__ void binary_bcast_vec_kernel(const BinaryArgs p, const int* flag) {
  const int n8 = p.n / 8;
  const bool a_splat = p.a_strides[p.rank - 1] == 0, b_splat = p.b_strides[p.rank - 1] == 0;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    int ai, bi;
    broadcast_offsets(p, i * 8, ai, bi);
    float a[8], b[8];
    load8_or_splat(p.a + ai, a_splat, a);
    load8_or_splat(p.b + bi, b_splat, b);
    if (seen_after(stop, __float_as_uint(a[0]) ^ __float_as_uint(b[0]))) return;
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = apply_binary(a[j], b[j], p.op, p.act);
    store8(p.y + i * 8, a);
  }
}

__global__ void binary_kernel(const BinaryArgs p, const int* flag) {
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    if (checks.next()) return;
    int ai, bi;
    broadcast_offsets(p, i, ai, bi);
    p.y[i] = __float2half(apply_binary(__half2float(p.a[ai]), __half2float(p.b[bi]), p.op, p.act));
  }
}

// Channels last (inner == 1) and a multiple of 8: the 8 elements of a vector are 8 consecutive
// channels, so their scales and shifts are two 16-byte loads each.
__global__ void scale_shift_channels_last_kernel(const ScaleShiftArgs p, const int* flag) {
  const int n8 = p.n / 8;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const int c = (i * 8) % p.channels;
    float v[8];
    load8(p.x + i * 8, v);
    const float4* sc = reinterpret_cast<const float4*>(p.scale + c);
    const float4* sh = reinterpret_cast<const float4*>(p.shift + c);
    const float4 s0 = sc[0], s1 = sc[1], h0 = sh[0], h1 = sh[1];
    if (seen_after(stop, __float_as_uint(v[0]) ^ __float_as_uint(s0.x) ^ __float_as_uint(s1.x) ^
                             __float_as_uint(h0.x) ^ __float_as_uint(h1.x))) {
      return;
    }
    const float s[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    const float h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = apply_act(fmaf(v[j], s[j], h[j]), p.act);
    store8(p.y + i * 8, v);
  }
}

__global__ void scale_shift_kernel(const ScaleShiftArgs p, const int* flag) {
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    if (checks.next()) return;
    const int c = (i / p.inner) % p.channels;
    p.y[i] = __float2half(apply_act(fmaf(__half2float(p.x[i]), p.scale[c], p.shift[c]), p.act));
  }
}

bool aligned_host(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// The broadcast vector path: innermost output extent a multiple of 8, each operand's innermost
// stride 0 or 1 (then its outer strides are multiples of that extent, so its 8-element groups
// stay 16-byte aligned).
bool binary_bcast_vectorizable(const BinaryArgs& p) {
  if (p.rank == 0 || p.out_dims[p.rank - 1] % 8 != 0) return false;
  const int sa = p.a_strides[p.rank - 1], sb = p.b_strides[p.rank - 1];
  return (sa == 0 || sa == 1) && (sb == 0 || sb == 1) && aligned_host(p.a) && aligned_host(p.b) &&
         aligned_host(p.y);
}

}  // namespace

void launch_unary(const UnaryArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.n % 8 == 0 && aligned_host(p.x) && aligned_host(p.y)) {
    unary_vec_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p, flag);
  } else {
    unary_kernel<<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_binary(const BinaryArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.same_shape && p.n % 8 == 0 && aligned_host(p.a) && aligned_host(p.b) && aligned_host(p.y)) {
    binary_same_vec_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p, flag);
  } else if (binary_bcast_vectorizable(p)) {
    binary_bcast_vec_kernel<<<blocks_for(p.n / 8, kThreads), kThreads, 0, s>>>(p, flag);
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
