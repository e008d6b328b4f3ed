// The GEMV path of the GEMM: up to kGemvMaxRows rows of a plain row-major A against B [N, K],
// a batch-1 classifier's shape. A block of kWarps warps owns kWarps * kCols output columns and
// walks K in chunks of kKChunk: each warp keeps its columns' B loads in flight (16 bytes a lane,
// kUnroll per column) while the block stages the chunk of A's rows in shared memory once, so A
// is read from L2 once per block instead of once per column (session 29, H100: with A read per
// warp, 8 rows ran 4x slower than one). The epilogue is the GEMM's: act(alpha * acc + bias +
// residual). The flag is tested at each chunk's barrier (__syncthreads_or), so a stop is
// block-uniform and comes within two chunks. Outputs are written once, after a column's whole
// reduction: a stopped kernel reruns exactly.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/kernel_params.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

constexpr int kGemvThreads = 256;
constexpr int kWarps = kGemvThreads / 32;
constexpr int kCols = 2;                        // columns per warp: each A fragment feeds kCols rows of B
constexpr int kChunk = 8;  // halves per 16-byte load
// Loads per lane per column per chunk: 8 keep 16 MB in flight across the H100 for a 4096-column
// classifier; at 8 rows the FMAs on A's staged rows bound the kernel and 4 fit the 128 registers.
template <int ROWS>
constexpr int kUnroll = ROWS <= 4 ? 8 : 4;
template <int ROWS>
constexpr int kKChunk = 32 * kChunk * kUnroll<ROWS>;  // K elements per chunk
constexpr unsigned kFullWarp = 0xffffffffu;

// A's rows [0, ROWS) x [base, base + kKChunk) into shared memory; rows past M and K's tail are zero.
template <int ROWS>
__device__ __forceinline__ void stage_a(const GemmParams& p, int base, __half (&tile)[ROWS][kKChunk<ROWS>]) {
  constexpr int kLoadsPerRow = kKChunk<ROWS> / kChunk;
  for (int i = threadIdx.x; i < ROWS * kLoadsPerRow; i += kGemvThreads) {
    const int m = i / kLoadsPerRow;
    const int k = (i % kLoadsPerRow) * kChunk;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (m < p.M && base + k < p.K) v = *reinterpret_cast<const uint4*>(p.a + static_cast<int64_t>(m) * p.in_c + base + k);
    *reinterpret_cast<uint4*>(&tile[m][k]) = v;
  }
}

// acc[c][m] += A[m, chunk] . B[column c, chunk] over this lane's share of the chunk.
template <int ROWS>
__device__ __forceinline__ void accumulate(const GemmParams& p, int base, const uint4 (&raw)[kCols][kUnroll<ROWS>],
                                           const __half (&tile)[ROWS][kKChunk<ROWS>], float (&acc)[kCols][ROWS]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < kUnroll<ROWS>; ++u) {
    const int k = u * 32 * kChunk + lane * kChunk;
    if (base + k >= p.K) break;
    float b[kCols][8];
#pragma unroll
    for (int c = 0; c < kCols; ++c) unpack8(raw[c][u], b[c]);
#pragma unroll
    for (int m = 0; m < ROWS; ++m) {
      if (m >= p.M) break;
      float a[8];
      unpack8(*reinterpret_cast<const uint4*>(&tile[m][k]), a);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[c][m] = fmaf(a[i], b[c][i], acc[c][m]);
      }
    }
  }
}

// Lane m writes row m of column n: after the butterfly every lane holds every sum.
template <int ROWS>
__device__ __forceinline__ void finish_column(const GemmParams& p, int n, float (&acc)[ROWS]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) acc[m] += __shfl_xor_sync(kFullWarp, acc[m], offset);
  }
#pragma unroll
  for (int m = 0; m < ROWS; ++m) {
    if (lane != m || m >= p.M) continue;
    const int64_t off = static_cast<int64_t>(m) * p.ldc + n;
    float r = p.alpha * acc[m] + (p.bias != nullptr ? p.bias[n] : 0.0f);
    if (p.residual != nullptr) r += __half2float(p.residual[off]);
    p.c[off] = __float2half(apply_act(r, p.act));
  }
}

template <int ROWS>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const GemmParams p, const int* flag) {
  __shared__ __align__(16) __half a_tile[ROWS][kKChunk<ROWS>];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x / 32;
  ItemFlag checks(flag);
  // Every loop bound below is the block's, not the warp's: every thread reaches each barrier.
  for (int n0 = blockIdx.x * kWarps * kCols; n0 < p.N; n0 += gridDim.x * kWarps * kCols) {
    const int first = n0 + warp * kCols;
    float acc[kCols][ROWS];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
      for (int m = 0; m < ROWS; ++m) acc[c][m] = 0.0f;
    }
    for (int base = 0; base < p.K; base += kKChunk<ROWS>) {
      uint4 raw[kCols][kUnroll<ROWS>];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const bool column = first + c < p.N;
        const __half* brow = p.b + static_cast<int64_t>(column ? first + c : 0) * p.ldb;
#pragma unroll
        for (int u = 0; u < kUnroll<ROWS>; ++u) {
          const int k = base + u * 32 * kChunk + lane * kChunk;
          raw[c][u] = column && k < p.K ? __ldg(reinterpret_cast<const uint4*>(brow + k)) : make_uint4(0, 0, 0, 0);
        }
      }
      stage_a<ROWS>(p, base, a_tile);
      if (__syncthreads_or(seen_after(checks.next(), raw[0][0]))) return;
      accumulate<ROWS>(p, base, raw, a_tile, acc);
      __syncthreads();  // every warp is done with this chunk of A before the next overwrites it
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (first + c < p.N) finish_column<ROWS>(p, first + c, acc[c]);
    }
  }
}

template <int ROWS>
void launch_rows(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
  gemv_kernel<ROWS><<<blocks_for(p.N, kWarps * kCols, kGemvThreads), kGemvThreads, 0, s>>>(p, flag);
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
  if (p.M <= 4) return launch_rows<4>(p, s, flag, name);
  return launch_rows<kGemvMaxRows>(p, s, flag, name);
}

}  // namespace atl::cuda
