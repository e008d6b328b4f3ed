#pragma once
// Device helpers shared by every kernel: the preemption checks, fused activations, fp16 vectors.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/grid_cap.h"
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

// The per-item check of grid-stride loops. The value tested at a thread's item k was read during
// item k - 1, so the read's L2 round trip hides behind the previous item: ptxas sinks an item's
// side-effect-free loads below any exit ahead of them, and a read tested at once put a full round
// trip before every item's loads (session 10's SASS). A raise is seen one item later. The first
// item's value is read at entry through L1 (ld.ca): L1 keeps no global data across kernel
// boundaries, so a flag raised before the launch is seen, at the cost of an L1 hit for all but
// the first warp on each SM; grids are capped at the resident blocks (blocks_for), so every block
// starts with the kernel and a stale entry read costs at most one item.
class ItemFlag {
 public:
  __device__ __forceinline__ explicit ItemFlag(const int* flag)
      : flag_(flag), pending_(flag != nullptr ? __ldca(flag) : 0) {}
  // The value to test for this item; issues the read for the next one.
  __device__ __forceinline__ int next() {
    const int seen = pending_;
    if (flag_ != nullptr) pending_ = load_flag(flag_);
    return seen;
  }
  // The read next() issued: for items long enough that it has landed by their end.
  __device__ __forceinline__ int latest() const { return pending_; }

 private:
  const int* flag_;
  int pending_;
};

// The test of an item's flag value, tied to a value computed from the item's own loads: ptxas
// sinks loads that only the path past an exit needs below that exit, which put the flag's L2
// round trip (at a thread's first item, the entry read's) before the data's instead of beside it.
// A branch that depends on the data keeps the loads ahead of it. Exact: true iff `seen` is
// nonzero, whatever `data` holds.
template <typename T>
__device__ __forceinline__ bool seen_after(int seen, const T& data) {
  uint32_t word = 0;
  memcpy(&word, &data, sizeof(T) < sizeof(word) ? sizeof(T) : sizeof(word));
  const auto s = static_cast<uint32_t>(seen);
  return (s | (word & (0u - s))) != 0;
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

// Eight halves moved as one 16-byte access. Through uint4, a native vector type: a struct of
// __half2 (even aligned to 16) is copied member by member, four 4-byte accesses in the PTX.
__device__ __forceinline__ void unpack8(const uint4& raw, float (&v)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    memcpy(&h, &words[i], sizeof(h));
    const float2 f = __half22float2(h);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ void load8(const __half* p, float (&v)[8]) {
  unpack8(*reinterpret_cast<const uint4*>(p), v);
}

__device__ __forceinline__ void store8(__half* p, const float (&v)[8]) {
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
    memcpy(&words[i], &h, sizeof(h));
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}

// The current device's SM count, read once (atoll drives one device per process).
inline int device_sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    ATL_CUDA_CHECK(cudaGetDevice(&device));
    ATL_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return count;
}

constexpr int kThreadsPerSm = 2048;

// `resident` blocks, or fewer under a padding launch's cap (GridCapScope).
inline int64_t capped_grid(int64_t resident) {
  const int cap = grid_cap();
  return cap > 0 ? std::min<int64_t>(resident, cap) : resident;
}

// Grid for `n` work items of `per_block` each, capped at what the device holds resident: blocks
// beyond it would wait to launch, and a preempted kernel still has to start and retire every one
// of them (milliseconds for a large batch). The kernels loop (grid-stride) and check the flag
// per item instead. `parts` shares the cap among the grid's y extent: under a GridCapScope of c
// blocks the whole grid (x times parts) holds at most max(c, parts), one block a part at least.
inline unsigned blocks_for(int64_t n, int per_block, int threads, int parts = 1) {
  const int64_t b = (n + per_block - 1) / per_block;
  const int64_t cap = capped_grid(int64_t{device_sm_count()} * (kThreadsPerSm / threads)) / parts;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, std::max<int64_t>(1, cap)));
}
inline unsigned blocks_for(int64_t n, int threads) {
  return blocks_for(n, threads, threads);
}

}  // namespace atl::cuda
