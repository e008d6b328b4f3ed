#pragma once
// Device helpers shared by every kernel: the preemption checks, fused activations, fp16 vectors.
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/kernel_params.h"

namespace atl::cuda {

// Every flag read goes to L2 (ld.relaxed.gpu): an L1-cached read (ld.ca) keeps the line an SM
// fetched first for the rest of the kernel, so blocks started after a mid-kernel raise would run
// on unstopped. The asm is volatile so that reads inside loops are never hoisted or merged.
__device__ __forceinline__ int load_flag(const int* flag) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}

// Per-item check of grid-stride loops (blocks are sized for one item per thread, so this is
// also the block-entry check).
__device__ __forceinline__ bool entry_preempted(const int* flag) {
  return flag != nullptr && load_flag(flag) != 0;
}

// Overlapped per-item check of memory-bound loops: flag_peek issues the flag read and returns at
// once; after the thread's first data loads, after_loads ties the flag to one loaded value, so
// the compiler keeps those loads ahead of the branch and both latencies overlap. The branch
// `if (stop) return;` then comes before any store.
__device__ __forceinline__ int flag_peek(const int* flag) {
  return flag != nullptr ? load_flag(flag) : 0;
}
__device__ __forceinline__ void after_loads(int& stop, float loaded) {
  asm volatile("" : "+r"(stop) : "f"(loaded));
}

// In-loop check of long threads that share no barrier: thread 0 forwards the value it read at
// the previous poll to a shared word and issues the next read, so no thread ever waits on L2
// and each block costs one flag read per poll. `pending` is thread 0's register (start it at
// flag_peek), `word` a shared int the block zeroes before its first barrier.
__device__ __forceinline__ bool block_poll(const int* flag, int& pending, volatile int* word) {
  if (flag == nullptr) return false;
  if (threadIdx.x == 0) {
    if (pending != 0) *word = 1;
    pending = load_flag(flag);
  }
  return *word != 0;
}

// The GPU's global nanosecond timer (coarse ticks; the same on every SM).
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ float apply_act(float v, int act) {
  switch (act) {
    case kActRelu:
      return fmaxf(v, 0.0f);
    case kActRelu6:
      return fminf(fmaxf(v, 0.0f), 6.0f);
    case kActGelu:
      return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case kActTanh:
      return tanhf(v);
    default:
      return v;
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
