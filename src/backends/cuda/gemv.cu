// The GEMV path of the GEMM: up to kGemvMaxRows rows of a plain row-major A against B [N, K],
// a batch-1 classifier's shape, where the tiled kernels stream the weights at about half of HBM
// bandwidth (VGG-19's first classifier Gemm: 205 MB in 98 us, docs/PERFORMANCE.md). One warp per
// output column n reads B's row once in 16-byte loads, four in flight per lane, and keeps every
// row of A's dot product in registers; A's rows (a few KB) stay in L1/L2. The epilogue is the
// GEMM's: act(alpha * acc + bias + residual). The flag is tested once per chunk of K (1024
// elements per warp) by the whole warp, so a stop is warp-uniform and comes within one chunk.
// Outputs are written once, after a column's whole reduction: a stopped kernel reruns exactly.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/kernel_params.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

constexpr int kGemvThreads = 256;
constexpr int kChunk = 8;   // halves per 16-byte load
constexpr int kUnroll = 4;  // loads of B in flight per lane
constexpr unsigned kFullWarp = 0xffffffffu;

// acc[m] += A[m, k .. k + 7] . b (rows m < p.M only).
template <int ROWS>
__device__ __forceinline__ void accumulate(const GemmParams& p, int k, const float (&b)[8], float (&acc)[ROWS]) {
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    if (m >= p.M) break;
    float a[8];
    load8(p.a + static_cast<int64_t>(m) * p.in_c + k, a);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[m] = fmaf(a[i], b[i], acc[m]);
  }
}

template <int ROWS>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const GemmParams p, const int* flag) {
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (kGemvThreads / 32);
  const int step = 32 * kChunk;  // K elements one warp covers per load
  ItemFlag checks(flag);
  for (int n = blockIdx.x * (kGemvThreads / 32) + threadIdx.x / 32; n < p.N; n += warps) {
    const __half* brow = p.b + static_cast<int64_t>(n) * p.ldb;
    float acc[ROWS];
#pragma unroll
    for (int m = 0; m < ROWS; ++m) acc[m] = 0.0f;
    // The trip count is the warp's, not the lane's: every lane reaches each vote.
    for (int base = 0; base < p.K; base += kUnroll * step) {
      if (__any_sync(kFullWarp, checks.next() != 0)) return;
      uint4 raw[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int k = base + u * step + lane * kChunk;
        raw[u] = k < p.K ? __ldg(reinterpret_cast<const uint4*>(brow + k)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int k = base + u * step + lane * kChunk;
        if (k >= p.K) break;
        float b[8];
        unpack8(raw[u], b);
        accumulate<ROWS>(p, k, b, acc);
      }
    }
#pragma unroll
    for (int m = 0; m < ROWS; ++m) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[m] += __shfl_xor_sync(kFullWarp, acc[m], offset);
    }
    // Lane m finishes row m: every lane holds every sum, so the select below is register moves.
#pragma unroll
    for (int m = 0; m < ROWS; ++m) {
      if (lane != m || m >= p.M) continue;
      const int64_t off = static_cast<int64_t>(m) * p.ldc + n;
      float r = p.alpha * acc[m] + (p.bias != nullptr ? p.bias[n] : 0.0f);
      if (p.residual != nullptr) r += __half2float(p.residual[off]);
      p.c[off] = __float2half(apply_act(r, p.act));
    }
  }
}

template <int ROWS>
void launch_rows(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
  gemv_kernel<ROWS><<<blocks_for(p.N, kGemvThreads / 32, kGemvThreads), kGemvThreads, 0, s>>>(p, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace

bool gemv_applies(const GemmParams& p) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  // In place (residual == c) a rerun after a stop would read outputs it already wrote.
  return tma_reads_plain_a(p) && p.batch == 1 && p.n_segment == 0 && p.M >= 1 && p.M <= kGemvMaxRows && p.N > 0 && p.K > 0 &&
         p.K % kChunk == 0 && p.in_c % kChunk == 0 && p.ldb % kChunk == 0 && aligned(p.a) && aligned(p.b) &&
         (p.residual == nullptr || p.residual != p.c);
}

void launch_gemv(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
  ATOLL_CHECK(gemv_applies(p), kInternal, "kernel '{}': the GEMV path was chosen for a GEMM it does not serve", name);
  if (p.M == 1) return launch_rows<1>(p, s, flag, name);
  if (p.M == 2) return launch_rows<2>(p, s, flag, name);
  if (p.M <= 4) return launch_rows<4>(p, s, flag, name);
  return launch_rows<kGemvMaxRows>(p, s, flag, name);
}

}  // namespace atl::cuda
