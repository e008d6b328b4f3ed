// ReduceMean over any set of axes and Cast between f16 storage and integers. Each has an 8-wide
// vector path for the common aligned case and a scalar path for everything else.
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

constexpr int kMathThreads = 256;
constexpr int kReduceWarpsPerBlock = 4;

__device__ __forceinline__ float reduce_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Offset of dense index `i` over `rank` extents (outermost first) with the given strides.
__device__ __forceinline__ int strided_offset(int i, int rank, const int* dims, const int* strides) {
  int off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int c = i % dims[d];
    i /= dims[d];
    off += c * strides[d];
  }
  return off;
}

// V consecutive halves as floats; V == 8 is one 16-byte load (the caller guarantees alignment).
template <int V>
__device__ __forceinline__ void load_v(const __half* x, float (&v)[V]) {
  if constexpr (V == 8) {
    load8(x, v);
  } else {
    v[0] = __half2float(*x);
  }
}

// The innermost input axis is reduced: one warp per output; its lanes walk the reduced
// elements (V consecutive ones per step, contiguous because the innermost reduced extent is a
// multiple of V) and sum in f32 in a fixed order, so results are deterministic.
template <int V>
__global__ void reduce_mean_rows_kernel(const ReduceMeanArgs p, const int* flag) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * kReduceWarpsPerBlock;
  const int steps = p.reduced / V;
  const float inv = 1.0f / static_cast<float>(p.reduced);
  ItemFlag checks(flag);
  for (int o = blockIdx.x * kReduceWarpsPerBlock + (threadIdx.x >> 5); o < p.outputs; o += warps) {
    const int seen = checks.next();
    const __half* x = p.x + strided_offset(o, p.kept_rank, p.kept_dims, p.kept_strides);
    float sum = 0.0f;
    for (int r = lane; r < steps; r += 32) {
      float v[V];
      load_v<V>(x + strided_offset(r * V, p.red_rank, p.red_dims, p.red_strides), v);
#pragma unroll
      for (int j = 0; j < V; ++j) sum += v[j];
    }
    sum = reduce_warp_sum(sum);
    // The elements are read by now, with the flag; lane 0's copy makes the exit warp-uniform.
    if (__shfl_sync(0xffffffffu, seen, 0)) return;
    if (lane == 0) p.y[o] = __float2half(sum * inv);
  }
}

// The innermost input axis is kept: one thread per V consecutive outputs (consecutive in memory
// too, so neighbouring threads read neighbouring addresses), summing over the reduced elements.
template <int V>
__global__ void reduce_mean_cols_kernel(const ReduceMeanArgs p, const int* flag) {
  const int items = p.outputs / V;
  const float inv = 1.0f / static_cast<float>(p.reduced);
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < items; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const __half* x = p.x + strided_offset(i * V, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc[V] = {};
    for (int r = 0; r < p.reduced; ++r) {
      float v[V];
      load_v<V>(x + strided_offset(r, p.red_rank, p.red_dims, p.red_strides), v);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] += v[j];
    }
    if (seen_after(stop, acc[0])) return;
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] *= inv;
    if constexpr (V == 8) {
      store8(p.y + i * 8, acc);
    } else {
      p.y[i] = __float2half(acc[0]);
    }
  }
}

// ---- Cast ------------------------------------------------------------------------------------

// Eight elements moved as 16-byte accesses (one for halves, two for i32, four for i64), copied
// through uint4: a struct copy compiles to one access per member.
template <typename T>
struct alignas(16) Vec8 {
  T v[8];
};

template <typename T>
__device__ __forceinline__ Vec8<T> load_vec8(const T* base, int i) {
  constexpr int kWords = sizeof(Vec8<T>) / sizeof(uint4);
  const uint4* src = reinterpret_cast<const uint4*>(base) + static_cast<int64_t>(i) * kWords;
  uint4 raw[kWords];
#pragma unroll
  for (int k = 0; k < kWords; ++k) raw[k] = src[k];
  Vec8<T> out;
  memcpy(&out, raw, sizeof(out));
  return out;
}

template <typename T>
__device__ __forceinline__ void store_vec8(T* base, int i, const Vec8<T>& v) {
  constexpr int kWords = sizeof(Vec8<T>) / sizeof(uint4);
  uint4 raw[kWords];
  memcpy(raw, &v, sizeof(raw));
  uint4* dst = reinterpret_cast<uint4*>(base) + static_cast<int64_t>(i) * kWords;
#pragma unroll
  for (int k = 0; k < kWords; ++k) dst[k] = raw[k];
}

__device__ __forceinline__ float cast_in(__half v) { return __half2float(v); }
__device__ __forceinline__ float cast_in(int32_t v) { return static_cast<float>(v); }
__device__ __forceinline__ float cast_in(int64_t v) { return static_cast<float>(v); }

// Integers below 2^24 are exact in f32, and f16 overflows long before: integer -> f32 -> f16
// rounds once. f16 -> integer truncates (cvt.rzi: NaN -> 0, saturating).
template <typename T>
__device__ __forceinline__ T cast_out(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename From, typename To>
__global__ void cast_vec_kernel(const From* x, To* y, int n8, const int* flag) {
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const Vec8<From> in = load_vec8(x, i);
    float f[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = cast_in(in.v[j]);
    if (seen_after(stop, f[0])) return;
    Vec8<To> out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = cast_out<To>(f[j]);
    store_vec8(y, i, out);
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* x, To* y, int n, const int* flag) {
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (checks.next()) return;
    y[i] = cast_out<To>(cast_in(x[i]));
  }
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <typename From, typename To>
void launch_cast_typed(const CastArgs& p, cudaStream_t s, const int* flag) {
  const auto* x = static_cast<const From*>(p.x);
  auto* y = static_cast<To*>(p.y);
  if (p.n % 8 == 0 && aligned16(x) && aligned16(y)) {
    cast_vec_kernel<From, To><<<blocks_for(p.n / 8, kMathThreads), kMathThreads, 0, s>>>(x, y, p.n / 8, flag);
  } else {
    cast_kernel<From, To><<<blocks_for(p.n, kMathThreads), kMathThreads, 0, s>>>(x, y, p.n, flag);
  }
}

}  // namespace

void launch_reduce_mean(const ReduceMeanArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.inner_reduced) {
    // Innermost reduced extent (stride 1) a multiple of 8: every 8-group is contiguous, and
    // 16-byte aligned (all other strides are multiples of that extent).
    const bool vec = p.red_rank > 0 && p.red_dims[p.red_rank - 1] % 8 == 0 && aligned16(p.x);
    const unsigned grid = blocks_for(p.outputs, kReduceWarpsPerBlock, kReduceWarpsPerBlock * 32);
    if (vec) {
      reduce_mean_rows_kernel<8><<<grid, kReduceWarpsPerBlock * 32, 0, s>>>(p, flag);
    } else {
      reduce_mean_rows_kernel<1><<<grid, kReduceWarpsPerBlock * 32, 0, s>>>(p, flag);
    }
  } else {
    // Innermost kept extent (stride 1 in x and y) a multiple of 8: 8 outputs per thread.
    const bool vec =
        p.kept_rank > 0 && p.kept_dims[p.kept_rank - 1] % 8 == 0 && aligned16(p.x) && aligned16(p.y);
    if (vec) {
      reduce_mean_cols_kernel<8><<<blocks_for(p.outputs / 8, kMathThreads), kMathThreads, 0, s>>>(p, flag);
    } else {
      reduce_mean_cols_kernel<1><<<blocks_for(p.outputs, kMathThreads), kMathThreads, 0, s>>>(p, flag);
    }
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_cast(const CastArgs& p, cudaStream_t s, const int* flag, const char* name) {
  switch (p.op) {
    case kCastI64ToHalf: launch_cast_typed<int64_t, __half>(p, s, flag); break;
    case kCastI32ToHalf: launch_cast_typed<int32_t, __half>(p, s, flag); break;
    case kCastHalfToI64: launch_cast_typed<__half, int64_t>(p, s, flag); break;
    default: launch_cast_typed<__half, int32_t>(p, s, flag); break;
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
