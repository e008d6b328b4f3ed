// Softmax and LayerNorm: one warp per row, statistics in f32. Rows of up to 2048 halves in
// 16-byte aligned chunks are held in registers, read once in 16-byte loads (all of a lane's loads
// in flight together: BERT's LayerNorm is latency-bound, 14 us per kernel when it walked the row
// three times in 2-byte loads); other rows are re-read from cache, so any length works.
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <type_traits>

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

// One warp per row, grid-stride: body(row, lane, seen) with `seen` the row's flag value (ItemFlag),
// false when the warp stops for it.
template <typename Body>
__device__ __forceinline__ void for_each_row(int rows, const int* flag, Body&& body) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * kWarpsPerBlock;
  ItemFlag checks(flag);
  for (int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5); row < rows; row += warps) {
    if (!body(row, lane, checks.next())) return;
  }
}

__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }

// Rows along the last axis (inner == 1). T: __half, or float for a graph input's f32 copy.
template <typename T>
__global__ void softmax_rows_kernel(const T* __restrict__ xs, const SoftmaxArgs p, const int* flag) {
  for_each_row(p.outer, flag, [&](int row, int lane, int seen) {
    const T* x = xs + row * p.len;
    __half* y = p.y + row * p.len;
    float m = -FLT_MAX;
    for (int j = lane; j < p.len; j += 32) m = fmaxf(m, to_f32(x[j]));
    m = warp_max(m);
    if (__shfl_sync(0xffffffffu, seen, 0)) return false;
    float sum = 0.0f;
    for (int j = lane; j < p.len; j += 32) sum += __expf(to_f32(x[j]) - m);
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < p.len; j += 32) y[j] = __float2half(__expf(to_f32(x[j]) - m) * inv);
    return true;
  });
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
  const float inv_d = 1.0f / static_cast<float>(p.d);
  for_each_row(p.rows, flag, [&](int row, int lane, int seen) {
    const __half* x = p.x + row * p.d;
    __half* y = p.y + row * p.d;
    float sum = 0.0f;
    for (int j = lane; j < p.d; j += 32) sum += __half2float(x[j]);
    const float mean = warp_sum(sum) * inv_d;
    // The row is read by now, with the flag; lane 0's copy makes the exit warp-uniform.
    if (__shfl_sync(0xffffffffu, seen, 0)) return false;
    float sq = 0.0f;
    for (int j = lane; j < p.d; j += 32) {
      const float t = __half2float(x[j]) - mean;
      sq += t * t;
    }
    const float rstd = rsqrtf(warp_sum(sq) * inv_d + p.epsilon);
    for (int j = lane; j < p.d; j += 32) {
      y[j] = __float2half((__half2float(x[j]) - mean) * rstd * p.gamma[j] + p.beta[j]);
    }
    return true;
  });
}

// ---- rows held in registers: lane l holds halves [8 (32 c + l), +8) for chunk c < kChunks ----

constexpr int kMaxChunks = 8;  // rows of up to 8 x 256 halves

template <int kChunks>
struct RowRegs {
  float v[kChunks][8];
};

// Whether the lane holds chunk c of a row of `len` halves (a multiple of 8).
__device__ __forceinline__ bool chunk_held(int c, int lane, int len) {
  return (c * 32 + lane) * 8 < len;
}

// The lane's chunks as floats (zeros past `len`); returns chunk 0's bits for seen_after.
template <int kChunks>
__device__ __forceinline__ uint4 load_row(const __half* x, int len, int lane, RowRegs<kChunks>& r) {
  uint4 raw[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    raw[c] = chunk_held(c, lane, len) ? *reinterpret_cast<const uint4*>(x + (c * 32 + lane) * 8) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw[c]);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(h[k]);
      r.v[c][2 * k] = f.x;
      r.v[c][2 * k + 1] = f.y;
    }
  }
  return raw[0];
}

__device__ __forceinline__ void store_chunk(__half* y, const float (&f)[8]) {
  uint4 out;
  __half2* h = reinterpret_cast<__half2*>(&out);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = __floats2half2_rn(f[2 * k], f[2 * k + 1]);
  *reinterpret_cast<uint4*>(y) = out;
}

template <int kChunks>
__global__ void softmax_rows_vec_kernel(const SoftmaxArgs p, const int* flag) {
  for_each_row(p.outer, flag, [&](int row, int lane, int seen) {
    RowRegs<kChunks> r;
    const uint4 first = load_row(p.x + static_cast<int64_t>(row) * p.len, p.len, lane, r);
    float m = -FLT_MAX;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!chunk_held(c, lane, p.len)) continue;
#pragma unroll
      for (int k = 0; k < 8; ++k) m = fmaxf(m, r.v[c][k]);
    }
    m = warp_max(m);
    if (__shfl_sync(0xffffffffu, static_cast<int>(seen_after(seen, first)), 0)) return false;
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        r.v[c][k] = chunk_held(c, lane, p.len) ? __expf(r.v[c][k] - m) : 0.0f;
        sum += r.v[c][k];
      }
    }
    const float inv = 1.0f / warp_sum(sum);
    __half* y = p.y + static_cast<int64_t>(row) * p.len;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!chunk_held(c, lane, p.len)) continue;
#pragma unroll
      for (int k = 0; k < 8; ++k) r.v[c][k] *= inv;
      store_chunk(y + (c * 32 + lane) * 8, r.v[c]);
    }
    return true;
  });
}

template <int kChunks>
__global__ void layer_norm_vec_kernel(const LayerNormArgs p, const int* flag) {
  const float inv_d = 1.0f / static_cast<float>(p.d);
  for_each_row(p.rows, flag, [&](int row, int lane, int seen) {
    RowRegs<kChunks> r;
    const uint4 first = load_row(p.x + static_cast<int64_t>(row) * p.d, p.d, lane, r);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int k = 0; k < 8; ++k) sum += r.v[c][k];  // zeros past d
    }
    const float mean = warp_sum(sum) * inv_d;
    if (__shfl_sync(0xffffffffu, static_cast<int>(seen_after(seen, first)), 0)) return false;
    float sq = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!chunk_held(c, lane, p.d)) continue;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float t = r.v[c][k] - mean;
        sq += t * t;
      }
    }
    const float rstd = rsqrtf(warp_sum(sq) * inv_d + p.epsilon);
    __half* y = p.y + static_cast<int64_t>(row) * p.d;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (!chunk_held(c, lane, p.d)) continue;
      const int j = (c * 32 + lane) * 8;
      const float4 g0 = *reinterpret_cast<const float4*>(p.gamma + j), g1 = *reinterpret_cast<const float4*>(p.gamma + j + 4);
      const float4 b0 = *reinterpret_cast<const float4*>(p.beta + j), b1 = *reinterpret_cast<const float4*>(p.beta + j + 4);
      const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int k = 0; k < 8; ++k) r.v[c][k] = (r.v[c][k] - mean) * rstd * g[k] + b[k];
      store_chunk(y + j, r.v[c]);
    }
    return true;
  });
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
}

// Chunks per lane for a register-held row of `len` halves (a multiple of 8), 0 where it does not fit.
int row_chunks(int len) {
  if (len % 8 != 0 || len > kMaxChunks * 256) return 0;
  const int chunks = (len + 255) / 256;
  return chunks <= 4 ? chunks : chunks <= 6 ? 6 : 8;
}

// The grid of a register-held row kernel, capped at the blocks its registers let the device hold
// (up to 127 per thread: fewer than blocks_for's thread count assumes), so that a preempted
// launch has no blocks still to start, and at a padding launch's cap (GridCapScope).
template <auto Kernel>
unsigned resident_row_blocks(int64_t rows) {
  static const int per_sm = [] {
    int n = 0;
    ATL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kWarpsPerBlock * 32, 0));
    return std::max(n, 1);
  }();
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, capped_grid(int64_t{device_sm_count()} * per_sm)));
}

// launch(std::integral_constant<int, k>) for the instantiated chunk count k that `chunks` names.
template <typename Launch>
void with_chunks(int chunks, Launch&& launch) {
  switch (chunks) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 6: return launch(std::integral_constant<int, 6>{});
    default: return launch(std::integral_constant<int, 8>{});
  }
}

unsigned row_blocks(int64_t rows) {
  return blocks_for(rows, kWarpsPerBlock, kWarpsPerBlock * 32);
}

template <typename T>
void enqueue_softmax(const T* x, const SoftmaxArgs& p, cudaStream_t s, const int* flag) {
  const int chunks = std::is_same_v<T, __half> && p.inner == 1 && aligned16(x) && aligned16(p.y) ? row_chunks(p.len) : 0;
  if (chunks > 0) {
    with_chunks(chunks, [&](auto c) {
      constexpr auto kernel = softmax_rows_vec_kernel<decltype(c)::value>;
      kernel<<<resident_row_blocks<kernel>(p.outer), kWarpsPerBlock * 32, 0, s>>>(p, flag);
    });
  } else if (p.inner == 1) {
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
  const bool aligned = aligned16(p.x) && aligned16(p.y) && aligned16(p.gamma) && aligned16(p.beta);
  const int chunks = aligned ? row_chunks(p.d) : 0;
  if (chunks > 0) {
    with_chunks(chunks, [&](auto c) {
      constexpr auto kernel = layer_norm_vec_kernel<decltype(c)::value>;
      kernel<<<resident_row_blocks<kernel>(p.rows), kWarpsPerBlock * 32, 0, s>>>(p, flag);
    });
  } else {
    layer_norm_kernel<<<row_blocks(p.rows), kWarpsPerBlock * 32, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
