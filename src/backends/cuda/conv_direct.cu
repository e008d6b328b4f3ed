// Direct convolutions over NHWC. Depthwise: each thread computes V consecutive channels of one
// output pixel. Small-channel (image stems): each thread computes 8 output channels of one pixel
// from a filter held in shared memory. Filters are stored [kh][kw][C/group][O], so the weights of
// 8 consecutive output channels for one (tap, channel) are one 16-byte load.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

template <int V>
__global__ void depthwise_kernel(const DirectConvParams p, const int* flag) {
  const int cv = p.c / V;
  const int total = p.n * p.out_h * p.out_w * cv;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int stop = flag_peek(flag, i < gridDim.x * blockDim.x);
    const int c = static_cast<int>(i % cv) * V;
    int pix = i / cv;
    const int ow = static_cast<int>(pix % p.out_w);
    pix /= p.out_w;
    const int oh = static_cast<int>(pix % p.out_h);
    const int img = static_cast<int>(pix / p.out_h);
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = p.bias ? p.bias[c + v] : 0.0f;
    const __half* xb = p.x + static_cast<int64_t>(img) * p.h * p.w_in * p.c + c;
    for (int r = 0; r < p.kh; ++r) {
      const int ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
      if (ih < 0 || ih >= p.h) continue;
      for (int s = 0; s < p.kw; ++s) {
        const int iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
        if (iw < 0 || iw >= p.w_in) continue;
        const __half* xp = xb + (static_cast<int64_t>(ih) * p.w_in + iw) * p.c;
        const __half* wp = p.w + (r * p.kw + s) * p.c + c;
        if constexpr (V == 8) {
          float xv[8], wv[8];
          load8(xp, xv);
          load8(wp, wv);
#pragma unroll
          for (int v = 0; v < 8; ++v) acc[v] = fmaf(xv[v], wv[v], acc[v]);
        } else {
          acc[0] = fmaf(__half2float(*xp), __half2float(*wp), acc[0]);
        }
      }
    }
    after_loads(stop, acc[0]);
    if (stop) return;
    const int out = i * V;  // output is dense NHWC: pixel-major, then channel
    if (p.residual) {
      if constexpr (V == 8) {
        float rv[8];
        load8(p.residual + out, rv);
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[v] += rv[v];
      } else {
        acc[0] += __half2float(p.residual[out]);
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = apply_act(acc[v], p.act);
    if constexpr (V == 8) {
      store8(p.y + out, acc);
    } else {
      p.y[out] = __float2half(acc[0]);
    }
  }
}

__global__ void small_channel_conv_kernel(const DirectConvParams p, const int* flag) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* s_w = reinterpret_cast<__half*>(smem_raw);
  __shared__ int s_stop;
  // The flag read overlaps the filter copy; the copy's barrier doubles as the entry check.
  int pending = threadIdx.x == 0 ? item_flag(flag, true) : 0;
  if (threadIdx.x == 0) s_stop = 0;
  const int filter = p.kh * p.kw * p.c * p.o;  // a multiple of 8 (o % 8 == 0)
  for (int i = threadIdx.x * 8; i < filter; i += blockDim.x * 8) {
    *reinterpret_cast<uint4*>(s_w + i) = *reinterpret_cast<const uint4*>(p.w + i);
  }
  if (__syncthreads_or(pending)) return;
  const int groups = p.o / 8;
  const int total = p.n * p.out_h * p.out_w * groups;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int oc = (i % groups) * 8;
    int pix = i / groups;
    const int ow = pix % p.out_w;
    pix /= p.out_w;
    const int oh = pix % p.out_h;
    const int img = pix / p.out_h;
    float acc[8];
#pragma unroll
    for (int v = 0; v < 8; ++v) acc[v] = p.bias ? p.bias[oc + v] : 0.0f;
    const __half* xb = p.x + static_cast<int64_t>(img) * p.h * p.w_in * p.c;
    for (int r = 0; r < p.kh; ++r) {
      // A stem thread runs tens of microseconds at large batch: poll once per filter row.
      if (block_poll(flag, pending, &s_stop)) return;
      const int ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
      if (ih < 0 || ih >= p.h) continue;
      for (int s = 0; s < p.kw; ++s) {
        const int iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
        if (iw < 0 || iw >= p.w_in) continue;
        const __half* xp = xb + (static_cast<int64_t>(ih) * p.w_in + iw) * p.c;
        const __half* wp = s_w + ((r * p.kw + s) * p.c) * p.o + oc;
        for (int c = 0; c < p.c; ++c) {
          const float xv = __half2float(xp[c]);
          float wv[8];
          load8(wp + c * p.o, wv);
#pragma unroll
          for (int v = 0; v < 8; ++v) acc[v] = fmaf(xv, wv[v], acc[v]);
        }
      }
    }
    const int out = i * 8;  // dense NHWC output: pixel-major, then channel
    if (p.residual) {
      float rv[8];
      load8(p.residual + out, rv);
#pragma unroll
      for (int v = 0; v < 8; ++v) acc[v] += rv[v];
    }
#pragma unroll
    for (int v = 0; v < 8; ++v) acc[v] = apply_act(acc[v], p.act);
    store8(p.y + out, acc);
  }
}

}  // namespace

void launch_small_channel_conv(const DirectConvParams& p, cudaStream_t s, const int* flag, const char* name) {
  const int64_t items = static_cast<int64_t>(p.n) * p.out_h * p.out_w * (p.o / 8);
  const size_t smem = static_cast<size_t>(p.kh) * p.kw * p.c * p.o * sizeof(__half);
  small_channel_conv_kernel<<<blocks_for(items, 256), 256, smem, s>>>(p, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_depthwise(const DirectConvParams& p, cudaStream_t s, const int* flag, const char* name) {
  const int64_t pixels = static_cast<int64_t>(p.n) * p.out_h * p.out_w;
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (p.c % 8 == 0 && aligned(p.x) && aligned(p.w) && aligned(p.y) && aligned(p.residual)) {
    depthwise_kernel<8><<<blocks_for(pixels * (p.c / 8), 256), 256, 0, s>>>(p, flag);
  } else {
    depthwise_kernel<1><<<blocks_for(pixels * p.c, 256), 256, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
