#pragma once
// What the TMA-fed GEMM kernels share (gemm_sm90_tma.cu: one block per output tile;
// gemm_sm90_cluster.cu: two blocks of a cluster per tile): the stage layout, and the device side
// of a K tile's loads: A's rows or im2col walk, and the residual's prefetch.
#include "backends/cuda/gemm_common.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/tma_maps.h"
#include "backends/cuda/wgmma_epilogue.cuh"

namespace atl::cuda::gemm {

constexpr int kTmaRowBytes = kTmaBK * 2;
constexpr int kTmaConsumerThreads = 256;
constexpr int kTmaThreads = 128 + kTmaConsumerThreads;

template <int BN, int STAGES>
struct TmaShape {
  static constexpr int kABytes = kTmaBM * kTmaRowBytes;
  static constexpr int kBBytes = BN * kTmaRowBytes;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // Stages, the two epilogue buffers, then the full and empty barriers, the stop and turn words;
  // 1024 bytes of slack let the kernel align the stages to the swizzle atom.
  static constexpr int kSmemBytes = STAGES * kStageBytes + 2 * kEpiBufBytes + 2 * STAGES * 8 + 16 + 1024;
  static_assert(BN == 64 || BN == 128 || BN == 256, "TMA tiles: 128 rows by 64, 128 or 256 columns");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");
};

#if defined(ATL_WGMMA_DEVICE)

// An output tile of a walk (a block's rows of it) and its K range.
struct TileCoords {
  int m0, n0, split, kt_begin, k_tiles;
};

// Tile `t` of a walk over `bm` x `bn` output tiles (M fastest, then N, then the split) and its K
// range.
__device__ __forceinline__ TileCoords walk_tile_coords(const GemmParams& p, int bm, int bn, int t) {
  const int tiles_m = (p.M + bm - 1) / bm, tiles_n = (p.N + bn - 1) / bn;
  const int per_split = tiles_m * tiles_n;
  const int mn = t % per_split;
  TileCoords c;
  c.m0 = (mn % tiles_m) * bm;
  c.n0 = (mn / tiles_m) * bn;
  c.split = t / per_split;
  const int k_tiles = (p.K + kTmaBK - 1) / kTmaBK;
  c.kt_begin = c.split * p.k_tiles_per_split;
  c.k_tiles = max(min(k_tiles, c.kt_begin + p.k_tiles_per_split) - c.kt_begin, 0);
  return c;
}

// Where an im2col walk starts for a tile's first output row: the window corner of pixel m0.
struct WindowCorner {
  int w, h, n;
};

__device__ __forceinline__ WindowCorner window_corner(const GemmParams& p, int m0) {
  const int per_img = p.out_h * p.out_w;
  const int n = m0 / per_img;
  const int rem = m0 - n * per_img;
  const int oh = rem / p.out_w;
  const int ow = rem - oh * p.out_w;
  return {ow * p.stride_w - p.pad_l, oh * p.stride_h - p.pad_t, n};
}

// K tile `k0` of A from row m0 (the map's box of rows): the plain matrix's columns, or 64
// channels of one filter tap. With a `multicast` mask, into every block of the cluster it names.
template <bool IM2COL>
__device__ __forceinline__ void tma_load_a(const GemmParams& p, const CUtensorMap* map_a, uint32_t dst, int k0, int m0,
                                           const WindowCorner& corner, uint32_t bar, uint16_t multicast = 0) {
  if constexpr (IM2COL) {
    const int tap = k0 / p.cg;
    const int r = tap / p.kw;
    const auto off_h = static_cast<uint16_t>(r * p.dil_h);
    const auto off_w = static_cast<uint16_t>((tap - r * p.kw) * p.dil_w);
    const int c = k0 - tap * p.cg;
    if (multicast != 0) {
      tma_load_im2col_4d_multicast(dst, map_a, c, corner.w, corner.h, corner.n, off_w, off_h, bar, multicast);
    } else {
      tma_load_im2col_4d(dst, map_a, c, corner.w, corner.h, corner.n, off_w, off_h, bar);
    }
  } else if (multicast != 0) {
    tma_load_2d_multicast(dst, map_a, k0, m0, bar, multicast);
  } else {
    tma_load_2d(dst, map_a, k0, m0, bar);
  }
}

// The tile's residual rows, one bulk L2 prefetch per row issued with its first K tile, so the
// epilogue's loads of them wait on L2 (prefetch_residual says why); rows the bulk form cannot
// name (16-byte aligned, whole 16-byte units) go line by line.
__device__ __forceinline__ void prefetch_tile_residual(const GemmParams& p, const TileCoords& c, int bn) {
  if (p.residual == nullptr || p.splits > 1 || c.n0 >= p.N) return;
  const EpilogueTarget t = epilogue_target(p, 0, c.split, c.n0);
  const int n = min(bn, p.N - c.n0);
  if (reinterpret_cast<uintptr_t>(t.residual) % 16 != 0 || p.ldc % 8 != 0 || c.n0 % 8 != 0 || n % 8 != 0) {
    prefetch_residual(p, t, c.m0, c.n0, kTmaBM, bn, 0, 1);
    return;
  }
  const int rows = min(kTmaBM, p.M - c.m0);
  for (int r = 0; r < rows; ++r) {
    const __half* row = t.residual + static_cast<int64_t>(c.m0 + r) * p.ldc + c.n0;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(row), "r"(n * 2) : "memory");
  }
}

// One K tile of a consumer warpgroup's 64 x BN tile: the MMAs on its A rows (warpgroup `wg` of
// the stage's 128) and on B at `a_bytes` into the stage; returns when the previous K tile's MMAs
// have retired, so the previous stage may then be released.
template <int BN>
__device__ __forceinline__ void tma_mma_k_tile(float (&acc)[BN / 2], uint32_t stage, uint32_t a_bytes, int wg) {
  const uint64_t da = sw128_desc(stage + wg * 64 * kTmaRowBytes);
  const uint64_t db = sw128_desc(stage + a_bytes);
  fence_registers(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTmaBK / 16; ++kk) wgmma_m64nNk16<BN>(acc, da + 2 * kk, db + 2 * kk);
  wgmma_commit();
  wgmma_wait<1>();
  fence_registers(acc);
}

#endif  // ATL_WGMMA_DEVICE

}  // namespace atl::cuda::gemm
