// Max / average pooling and global average pooling over NHWC; V channels per thread.
#include <cfloat>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

template <int V>
__device__ __forceinline__ void load_v(const __half* p, float (&v)[V]) {
  if constexpr (V == 8) {
    load8(p, v);
  } else {
    v[0] = __half2float(*p);
  }
}

template <int V>
__device__ __forceinline__ void store_v(__half* p, const float (&v)[V]) {
  if constexpr (V == 8) {
    store8(p, v);
  } else {
    *p = __float2half(v[0]);
  }
}

template <int V>
__global__ void pool_kernel(const PoolArgs p, const int* flag) {
  const int cv = p.c / V;
  const int total = p.n * p.out_h * p.out_w * cv;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const int c = static_cast<int>(i % cv) * V;
    int pix = i / cv;
    const int ow = static_cast<int>(pix % p.out_w);
    pix /= p.out_w;
    const int oh = static_cast<int>(pix % p.out_h);
    const int img = static_cast<int>(pix / p.out_h);
    const int h0 = oh * p.stride_h - p.pad_t, w0 = ow * p.stride_w - p.pad_l;
    // PyTorch's divisor: the window clipped to the padded input (count_include_pad), or to the
    // input itself; with ceil_mode a window may also run past the padding.
    const int h_end_pad = min(h0 + p.kh, p.h + p.pad_t), w_end_pad = min(w0 + p.kw, p.w + p.pad_l);
    const int hs = max(h0, 0), ws = max(w0, 0), he = min(h0 + p.kh, p.h), we = min(w0 + p.kw, p.w);
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = p.is_max ? -FLT_MAX : 0.0f;
    const __half* xb = p.x + static_cast<int64_t>(img) * p.h * p.w * p.c + c;
    for (int ih = hs; ih < he; ++ih) {
      for (int iw = ws; iw < we; ++iw) {
        float xv[V];
        load_v<V>(xb + (static_cast<int64_t>(ih) * p.w + iw) * p.c, xv);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = p.is_max ? fmaxf(acc[v], xv[v]) : acc[v] + xv[v];
      }
    }
    if (seen_after(stop, acc[0])) return;
    if (!p.is_max) {
      const int count = p.count_include_pad ? (h_end_pad - h0) * (w_end_pad - w0) : (he - hs) * (we - ws);
      const float inv = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] *= inv;
    }
    store_v<V>(p.y + i * V, acc);
  }
}

// One thread per (image, V channels), summing over the pixels in order.
template <int V>
__global__ void global_avg_pool_kernel(const __half* x, __half* y, int n, int hw, int c, const int* flag) {
  const int cv = c / V;
  const int total = n * cv;
  const float inv = 1.0f / static_cast<float>(hw);
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const int img = i / cv;
    const int ch = static_cast<int>(i % cv) * V;
    const __half* xb = x + img * hw * c + ch;
    float acc[V] = {};
    for (int j = 0; j < hw; ++j) {
      float xv[V];
      if constexpr (V == 2) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(xb + static_cast<int64_t>(j) * c));
        xv[0] = f.x;
        xv[1] = f.y;
      } else {
        xv[0] = __half2float(xb[static_cast<int64_t>(j) * c]);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] += xv[v];
    }
    if (seen_after(stop, acc[0])) return;
    if constexpr (V == 2) {
      *reinterpret_cast<__half2*>(y + img * c + ch) = __floats2half2_rn(acc[0] * inv, acc[1] * inv);
    } else {
      y[img * c + ch] = __float2half(acc[0] * inv);
    }
  }
}

}  // namespace

void launch_pool(const PoolArgs& p, cudaStream_t s, const int* flag, const char* name) {
  const int64_t pixels = static_cast<int64_t>(p.n) * p.out_h * p.out_w;
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (p.c % 8 == 0 && aligned(p.x) && aligned(p.y)) {
    pool_kernel<8><<<blocks_for(pixels * (p.c / 8), 256), 256, 0, s>>>(p, flag);
  } else {
    pool_kernel<1><<<blocks_for(pixels * p.c, 256), 256, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_global_avg_pool(const GlobalPoolArgs& p, cudaStream_t s, const int* flag, const char* name) {
  const __half* x = p.x;
  __half* y = p.y;
  const int n = p.n, hw = p.hw, c = p.c;
  // Narrow vectors keep enough threads busy at batch 1 (C = 2048 -> 1024 threads).
  if (c % 2 == 0 && reinterpret_cast<uintptr_t>(x) % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 4 == 0) {
    global_avg_pool_kernel<2><<<blocks_for(static_cast<int64_t>(n) * c / 2, 128), 128, 0, s>>>(x, y, n, hw, c, flag);
  } else {
    global_avg_pool_kernel<1><<<blocks_for(static_cast<int64_t>(n) * c, 128), 128, 0, s>>>(x, y, n, hw, c, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
