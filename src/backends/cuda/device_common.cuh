#pragma once
// Device helpers shared by every kernel: the preemption checks, fused activations, fp16 vectors.
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/kernel_params.h"

namespace atl::cuda {

// Entry check of short, memory-bound kernels: a cacheable read, so the first warp on each SM
// misses and every later block hits L1 instead of queueing on one L2 line (each kernel starts
// with a clean L1, so a flag raised before the launch is always seen).
__device__ __forceinline__ bool entry_preempted(const int* flag) { return flag != nullptr && __ldca(flag) != 0; }

// Warp-uniform entry check for kernels that use warp shuffles (every lane must stay or leave).
__device__ __forceinline__ bool warp_entry_preempted(const int* flag) {
  return flag != nullptr && __any_sync(0xffffffffu, __ldca(flag) != 0);
}

// Read of long kernels while they run: bypasses L1, so a flag raised mid-kernel is seen.
__device__ __forceinline__ int read_flag_now(const int* flag) { return *reinterpret_cast<const volatile int*>(flag); }

__device__ __forceinline__ float apply_act(float v, int act) {
  switch (act) {
    case kActRelu: return fmaxf(v, 0.0f);
    case kActRelu6: return fminf(fmaxf(v, 0.0f), 6.0f);
    case kActGelu: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case kActTanh: return tanhf(v);
    default: return v;
  }
}

// Eight halves moved as one 16-byte access.
struct alignas(16) Half8 {
  __half2 h[4];
};

__device__ __forceinline__ void load8(const __half* p, float (&v)[8]) {
  const Half8 x = *reinterpret_cast<const Half8*>(p);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(x.h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ void store8(__half* p, const float (&v)[8]) {
  Half8 x;
#pragma unroll
  for (int i = 0; i < 4; ++i) x.h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<Half8*>(p) = x;
}

// Grid sized for `n` work items of `per_block` each, capped so huge tensors loop instead.
inline unsigned blocks_for(int64_t n, int per_block) {
  const int64_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

}  // namespace atl::cuda
