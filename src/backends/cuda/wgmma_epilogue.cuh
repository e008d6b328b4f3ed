#pragma once
// The epilogue of the wgmma kernels (m64nNk16 accumulators, 64 rows per warpgroup), staged
// through shared memory. The accumulators' fragment layout puts each thread's outputs in 2 rows
// and scattered columns, and an unrolled per-accumulator epilogue inlined the whole fused
// epilogue (bias, residual, every activation) at each of them: 200-370 KB of code per kernel,
// which missed the instruction cache on every tile (ncu on the H200: "no instruction" 60-67% of
// the stalls, the SMs 93% idle). Staged, the epilogue is a few copies of finish_quad in a loop.
#include "backends/cuda/gemm_common.cuh"
#include "backends/cuda/wgmma.cuh"

namespace atl::cuda::gemm {

// A warpgroup's 64 rows go through its buffer 32 columns at a time (rows padded to 40 floats:
// fragment writes spread over the banks, rows stay 16-byte aligned), then are finished
// row-contiguous, four outputs per thread per step.
constexpr int kEpiCols = 32;
constexpr int kEpiStride = kEpiCols + 8;
constexpr int kEpiBufBytes = 64 * kEpiStride * 4;
// Chunks wait on their residual loads one after another, and a flag raised after the check before
// the epilogue waited for all of them (a 128x256 tile has eight: ResNet-50 b32's one-wave layer4
// GEMMs exited in up to 23 us on the H200). So the epilogue checks every p.epi_check_chunks chunks
// (CudaBackendOptions::gemm_epi_check_chunks).

#if defined(ATL_WGMMA_DEVICE)

// Immediate barrier ids: with a register id ptxas reserves all 16 of the block's barriers, which
// caps the blocks an SM holds.
__device__ __forceinline__ void warpgroup_barrier(int wg) {
  if (wg == 0) {
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  } else {
    asm volatile("bar.sync 3, 128;\n" ::: "memory");
  }
}

// One consumer warpgroup's 64 x BN accumulators (m64nNk16 layout: warp w holds rows 16w..16w+15;
// registers 4j..4j+3 hold columns 8j + 2(lane % 4) + {0, 1} of rows lane / 4 and lane / 4 + 8)
// through `buf`, 32 columns per chunk. Every p.epi_check_chunks chunks `stop_check()` replaces the
// chunk's first barrier: a barrier over every consumer thread that returns true when the block
// saw the flag, and the epilogue then stops (the tile's outputs are partial; the kernel reruns).
// Returns whether it stopped.
// Named barriers 2 and 3 (0 is __syncthreads, 1 the TMA kernel's consumers).
template <int BN, typename StopCheck>
__device__ __forceinline__ bool staged_epilogue(const GemmParams& p, const EpilogueTarget& target, int m_base,
                                                int n_base, const float (&acc)[BN / 2], float* buf, int wtid, int wg,
                                                StopCheck&& stop_check) {
  const int lane = wtid & 31;
  const int frag_row = (wtid / 32) * 16 + lane / 4;
  const int frag_col = (lane & 3) * 2;
  // A thread finishes the same four columns of every 16th row of a chunk (128 threads, eight
  // per row). A chunk's addends (one bias quad, one residual quad per row) are loaded while the
  // chunk before it is finished, ahead of that chunk's stores: their columns differ from every
  // store before them, so a store that may alias them does not order them, and each chunk's
  // loads wait behind the previous chunk's work instead of one round trip each in turn.
  constexpr int kChunks = BN / kEpiCols;
  constexpr int kQuadsPerRow = kEpiCols / 4;
  constexpr int kQuads = 64 * kQuadsPerRow / 128;
  const int quad_row = wtid / kQuadsPerRow, quad_col = (wtid % kQuadsPerRow) * 4;
  struct ChunkAddends {
    float4 bias;
    uint2 residual[kQuads];
  };
  const auto load_addends = [&](int chunk) {
    ChunkAddends a;
    const int col = n_base + chunk * kEpiCols + quad_col;
    a.bias = quad_bias(p, target, col);
#pragma unroll
    for (int i = 0; i < kQuads; ++i) a.residual[i] = quad_residual(p, target, m_base + quad_row + i * (128 / kQuadsPerRow), col);
    return a;
  };
  ChunkAddends add = load_addends(0);
#pragma unroll 1
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const int col = n_base + chunk * kEpiCols + quad_col;
    // The previous chunk (or tile) has been read.
    if (chunk > 0 && (chunk & (p.epi_check_chunks - 1)) == 0) {
      if (stop_check()) return true;
    } else {
      warpgroup_barrier(wg);
    }
#pragma unroll
    for (int cc = 0; cc < kChunks; ++cc) {
      if (cc != chunk) continue;
#pragma unroll
      for (int jj = 0; jj < kEpiCols / 8; ++jj) {
        const int j = cc * (kEpiCols / 8) + jj;
        float* at = buf + frag_row * kEpiStride + jj * 8 + frag_col;
        *reinterpret_cast<float2*>(at) = make_float2(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<float2*>(at + 8 * kEpiStride) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
      }
    }
    warpgroup_barrier(wg);
    const ChunkAddends next = chunk + 1 < kChunks ? load_addends(chunk + 1) : add;
#pragma unroll
    for (int i = 0; i < kQuads; ++i) {
      const int r = quad_row + i * (128 / kQuadsPerRow);
      const float4 v = *reinterpret_cast<const float4*>(buf + r * kEpiStride + quad_col);
      finish_quad(p, target, m_base + r, col, v, QuadAddend{add.bias, add.residual[i]});
    }
    add = next;
  }
  return false;
}

#endif

}  // namespace atl::cuda::gemm
