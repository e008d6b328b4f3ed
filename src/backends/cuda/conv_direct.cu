// Direct depthwise convolutions over NHWC: each thread computes V consecutive channels of one
// output pixel from filters stored [kh][kw][C][1]. And the image stems' channel padding, which lets
// the implicit GEMM run them.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

// KS: the filter's height and width when known at compile time (3: the taps unroll, so their
// loads are in flight together), 0 for any size.
template <int V, int KS>
__global__ void depthwise_kernel(const DirectConvParams p, const int* flag) {
  const int cv = p.c / V;
  const int total = p.n * p.out_h * p.out_w * cv;
  const int kh = KS > 0 ? KS : p.kh, kw = KS > 0 ? KS : p.kw;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    checks.next();
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
#pragma unroll
    for (int r = 0; r < kh; ++r) {
      const int ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
#pragma unroll
      for (int s = 0; s < kw; ++s) {
        const int iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
        if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w_in) continue;
        const __half* xp = xb + (static_cast<int64_t>(ih) * p.w_in + iw) * p.c;
        const __half* wp = p.w + (r * kw + s) * p.c + c;
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
    // An item is long (nine taps of loads), so it tests the read issued at its own start, long
    // landed: testing the one before cost a whole item more (MobileNet-V2 b32's stride-2
    // depthwise exited in up to 26 us on the H200).
    if (checks.latest()) return;
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

template <int V>
void launch_depthwise_v(const DirectConvParams& p, unsigned blocks, cudaStream_t s, const int* flag) {
  if (p.kh == 3 && p.kw == 3) {
    depthwise_kernel<V, 3><<<blocks, 256, 0, s>>>(p, flag);
  } else {
    depthwise_kernel<V, 0><<<blocks, 256, 0, s>>>(p, flag);
  }
}

// One pixel per item: its c channels, then zeros up to kStemChannels, as one 16-byte store.
__global__ void pad_channels_kernel(const PadChannelsParams p, const int* flag) {
  ItemFlag checks(flag);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.pixels;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int stop = checks.next();
    __align__(16) __half v[kStemChannels];
    const __half* xp = p.x + i * p.c;
#pragma unroll
    for (int c = 0; c < kStemChannels; ++c) v[c] = c < p.c ? xp[c] : __float2half(0.0f);
    if (seen_after(stop, v[0])) return;
    *reinterpret_cast<uint4*>(p.y + i * kStemChannels) = *reinterpret_cast<const uint4*>(v);
  }
}

}  // namespace

void launch_pad_channels(const PadChannelsParams& p, cudaStream_t s, const int* flag, const char* name) {
  pad_channels_kernel<<<blocks_for(p.pixels, 256), 256, 0, s>>>(p, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_depthwise(const DirectConvParams& p, cudaStream_t s, const int* flag, const char* name) {
  const int64_t pixels = static_cast<int64_t>(p.n) * p.out_h * p.out_w;
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (p.c % 8 == 0 && aligned(p.x) && aligned(p.w) && aligned(p.y) && aligned(p.residual)) {
    launch_depthwise_v<8>(p, blocks_for(pixels * (p.c / 8), 256), s, flag);
  } else {
    launch_depthwise_v<1>(p, blocks_for(pixels * p.c, 256), s, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
