// Tensor-core GEMM and implicit-GEMM convolution: mma.sync m16n8k16 (f16 in, f32 accumulate),
// ldmatrix fragment loads, a 4-stage cp.async pipeline, fused epilogue, optional split-K with a
// workspace and a fixed-order reduction (so results are bit-identical run to run).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/gemm_common.cuh"

namespace atl::cuda {

namespace {

using namespace gemm;

constexpr int BK = kGemmTileK;
constexpr int kStages = 4;
constexpr int kSmemPad = 8;  // halves; keeps ldmatrix rows on distinct banks
// Blocks re-check the preemption flag every this many K tiles. A tile is 0.1-3 us of work (the
// long ones: 128x128 tiles at one or two blocks per SM); with the read one check ahead, a block
// stops within two intervals of a raise. Every 2 tiles cost BERT ~1.7% more with the flag and
// left GEMM exit p99 where it was (session 5 in docs/PERFORMANCE.md).
constexpr int kPreemptCheckTiles = 4;

template <int BM, int BN, int WM, int WN, bool VEC, bool BKN>
struct GemmTileShape {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kWarpM = BM / WM, kWarpN = BN / WN;
  static constexpr int kMi = kWarpM / 16, kNi = kWarpN / 8;
  static constexpr int kALd = BK + kSmemPad;
  static constexpr int kBRows = BKN ? BK : BN;
  static constexpr int kBLd = BKN ? BN + kSmemPad : BK + kSmemPad;
  static constexpr int kAStage = BM * kALd, kBStage = kBRows * kBLd;
  static constexpr int kSmemBytes = kStages * (kAStage + kBStage) * 2;
  // Loads per thread per stage.
  static constexpr int kAVecLoads = BM * (BK / 8) / kThreads;
  static constexpr int kAScalarLoads = BM * BK / kThreads;
  static constexpr int kBVecLoads = BN * (BK / 8) / kThreads;
  static constexpr int kBScalarLoads = BN * BK / kThreads;
  static_assert(kNi % 2 == 0, "B fragments are loaded two n-blocks at a time");
  static_assert(kAVecLoads >= 1 && kBVecLoads >= 1, "tile too small for the thread count");
};

// One output tile of the uncapped grid: (bx, by) in M and N, bz = batch * splits + split.
// Returns true when the block saw the flag and stopped (the tile's outputs are then partial).
template <int BM, int BN, int WM, int WN, bool VEC, bool BKN>
__device__ __forceinline__ bool gemm_tile(const GemmParams& p, const int* flag, int& flag_seen, int bx, int by, int bz,
                                          unsigned char* smem_raw) {
  using S = GemmTileShape<BM, BN, WM, WN, VEC, BKN>;
  __half* sA = reinterpret_cast<__half*>(smem_raw);
  __half* sB = sA + kStages * S::kAStage;

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WN, warp_n = warp % WN;
  const int m0 = bx * BM, n0 = by * BN;
  const int split = bz % p.splits;
  const int bidx = bz / p.splits;
  const int k_tiles = (p.K + BK - 1) / BK;
  const int kt_begin = split * p.k_tiles_per_split;
  const int kt_end = min(k_tiles, kt_begin + p.k_tiles_per_split);
  const int n_tiles = max(kt_end - kt_begin, 0);

  const __half* A = p.a + batch_offset(p, bidx, p.a_batch_stride, p.a_outer_stride);
  const __half* B = p.b + batch_offset(p, bidx, p.b_batch_stride, p.b_outer_stride);
  const EpilogueTarget target = epilogue_target(p, bidx, split, n0);
  prefetch_residual(p, target, m0, n0, BM, BN, tid, S::kThreads);

  // Each thread always loads the same rows and the same column of a tile, so the per-row
  // im2col origins are computed once and the k -> tap division once per tile.
  constexpr int kALoads = VEC ? S::kAVecLoads : S::kAScalarLoads;
  constexpr int kARowStep = VEC ? S::kThreads / (BK / 8) : S::kThreads / BK;
  const int a_row0 = VEC ? tid / (BK / 8) : tid / BK;
  const int a_col = VEC ? (tid % (BK / 8)) * 8 : tid % BK;
  RowOrigin rows[kALoads];
#pragma unroll
  for (int i = 0; i < kALoads; ++i) rows[i] = row_origin(p, A, m0 + a_row0 + i * kARowStep);

  // Calls fn(slot, smem destination, global source, in range) for each element (VEC: each
  // 16-byte chunk) this thread loads for K tile kt into `stage`; slots number them 0..kLoads-1.
  constexpr int kBLoads = VEC ? S::kBVecLoads : S::kBScalarLoads;
  constexpr int kLoads = kALoads + kBLoads;
  auto visit_tile = [&](int stage, int kt, auto&& fn) {
    __half* a_dst = sA + stage * S::kAStage;
    __half* b_dst = sB + stage * S::kBStage;
    const int k0 = kt * BK;
    const ColTap tap = col_tap(p, k0 + a_col);
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      bool valid;
      const __half* src = tap_address(p, rows[i], tap, valid);
      fn(i, a_dst + (a_row0 + i * kARowStep) * S::kALd + a_col, src, valid);
    }
    if constexpr (!BKN) {  // B is [N, K]: rows are n, K contiguous
      constexpr int kRowStep = VEC ? S::kThreads / (BK / 8) : S::kThreads / BK;
      const int row0 = VEC ? tid / (BK / 8) : tid / BK;
      const int col = VEC ? (tid % (BK / 8)) * 8 : tid % BK;
      const int k = k0 + col;
#pragma unroll
      for (int i = 0; i < kBLoads; ++i) {
        const int row = row0 + i * kRowStep;
        const int n = n0 + row;
        const bool valid = n < p.N && k < p.K;
        fn(kALoads + i, b_dst + row * S::kBLd + col, valid ? B + static_cast<int64_t>(n) * p.ldb + k : B, valid);
      }
    } else {  // B is [K, N]: rows are k, N contiguous
      constexpr int kPerRow = VEC ? BN / 8 : BN;
#pragma unroll
      for (int i = 0; i < kBLoads; ++i) {
        const int id = tid + i * S::kThreads;
        const int row = id / kPerRow;
        const int col = (id % kPerRow) * (VEC ? 8 : 1);
        const int k = k0 + row, n = n0 + col;
        const bool valid = n < p.N && k < p.K;
        fn(kALoads + i, b_dst + row * S::kBLd + col, valid ? B + static_cast<int64_t>(k) * p.ldb + n : B, valid);
      }
    }
  };
  // VEC: cp.async straight into shared memory. Scalar: elements go through registers, fetched
  // one tile ahead and stored after the MMAs, so their latency overlaps the math.
  __half staged[VEC ? 1 : kLoads];
  auto issue_async = [&](int stage, int kt) {
    visit_tile(stage, kt, [](int, __half* dst, const __half* src, bool valid) { cp_async16(dst, src, valid); });
  };
  auto fetch = [&](int kt) {
    visit_tile(0, kt, [&](int slot, __half*, const __half* src, bool valid) {
      staged[slot] = valid ? *src : __float2half(0.0f);
    });
  };
  auto commit = [&](int stage) {
    visit_tile(stage, 0, [&](int slot, __half* dst, const __half*, bool) { *dst = staged[slot]; });
  };

  float acc[S::kMi][S::kNi][4];
#pragma unroll
  for (int i = 0; i < S::kMi; ++i)
#pragma unroll
    for (int j = 0; j < S::kNi; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) {
      if constexpr (VEC) {
        issue_async(s, kt_begin + s);
      } else {
        fetch(kt_begin + s);
        commit(s);
      }
    }
    cp_async_commit();
  }

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    // The check doubles as the pipeline's barrier: at tile 0 it is the entry check, later it
    // stops long blocks (deep K) mid-loop.
    if (flag != nullptr && t % kPreemptCheckTiles == 0) {
      if (__syncthreads_or(flag_seen)) {
        cp_async_wait<0>();
        return true;
      }
      if (tid == 0) flag_seen = load_flag(flag);
    } else {
      __syncthreads();
      // The last K tile's read, tested before the epilogue: issued ahead of the tile's MMAs, its
      // L2 round trip hides behind them (issued after them, it stalled every tile's epilogue).
      if (flag != nullptr && tid == 0 && t == n_tiles - 1) flag_seen = load_flag(flag);
    }
    const int next = t + kStages - 1;
    if (next < n_tiles) {
      if constexpr (VEC) {
        issue_async(next % kStages, kt_begin + next);
      } else {
        fetch(kt_begin + next);
      }
    }
    cp_async_commit();

    const __half* a_tile = sA + (t % kStages) * S::kAStage;
    const __half* b_tile = sB + (t % kStages) * S::kBStage;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[S::kMi][4];
#pragma unroll
      for (int i = 0; i < S::kMi; ++i) {
        const int row = warp_m * S::kWarpM + i * 16 + (lane & 15);
        ldmatrix_x4(af[i], a_tile + row * S::kALd + kk + (lane >> 4) * 8);
      }
      uint32_t bf[S::kNi][2];
#pragma unroll
      for (int j = 0; j < S::kNi; j += 2) {
        uint32_t r[4];
        if constexpr (!BKN) {
          const int row = warp_n * S::kWarpN + j * 8 + (lane & 7) + (lane >> 4) * 8;
          ldmatrix_x4(r, b_tile + row * S::kBLd + kk + ((lane >> 3) & 1) * 8);
        } else {
          const int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
          ldmatrix_x4_trans(r, b_tile + krow * S::kBLd + warp_n * S::kWarpN + j * 8 + (lane >> 4) * 8);
        }
        bf[j][0] = r[0];
        bf[j][1] = r[1];
        bf[j + 1][0] = r[2];
        bf[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < S::kMi; ++i)
#pragma unroll
        for (int j = 0; j < S::kNi; ++j) mma16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
    // The slot being filled was last read in iteration t - 1, which every thread has left.
    if constexpr (!VEC) {
      if (next < n_tiles) commit(next % kStages);
    }
  }
  cp_async_wait<0>();
  // The check before the epilogue (an empty K range had no other): with one check per four K
  // tiles, a raise just after it cost the rest of the K loop and the epilogue: up to 24 us for
  // ResNet-50 b32's 1x1 convolutions on this kernel's 128x128 tile (H200). The read
  // issued now is what a persistent block's next tile tests first.
  if (flag != nullptr) {
    if (__syncthreads_or(flag_seen)) return true;
    if (tid == 0) flag_seen = load_flag(flag);
  }

  // Epilogue. Fragment element e of tile (i, j): row lane/4 (+8 for e >= 2), column 2*(lane%4) + e%2.
  // Pair q = (i, j, h) in that order.
  store_pairs<S::kMi * S::kNi * 2>(p, target, [&](int q, int& row, int& col, float& v0, float& v1) {
    const int i = q / (S::kNi * 2), j = (q / 2) % S::kNi, h = q % 2;
    col = n0 + warp_n * S::kWarpN + j * 8 + (lane & 3) * 2;
    row = m0 + warp_m * S::kWarpM + i * 16 + (lane >> 2) + h * 8;
    v0 = acc[i][j][h * 2];
    v1 = acc[i][j][h * 2 + 1];
  });
  return false;
}

// One block per tile or the persistent walk (gemm_common.cuh, for_each_tile).
template <int BM, int BN, int WM, int WN, bool VEC, bool BKN, bool PERSISTENT>
__global__ void __launch_bounds__(WM* WN * 32) gemm_kernel(const GemmParams p, const int* flag) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Thread 0 reads the flag one check ahead: the value loaded now is tested at the next check
  // (the first at K tile 0, then every kPreemptCheckTiles), so the read's latency hides behind
  // the prologue and the tiles in between instead of stalling the block.
  int flag_seen = (flag != nullptr && threadIdx.x == 0) ? load_flag(flag) : 0;
  for_each_tile<BM, BN, PERSISTENT>(p, flag, flag_seen, [&](int bx, int by, int bz) {
    return gemm_tile<BM, BN, WM, WN, VEC, BKN>(p, flag, flag_seen, bx, by, bz, smem_raw);
  });
}

// Sums the split-K partials in split order and applies the epilogue.
__global__ void split_reduce_kernel(const GemmParams p, const int* flag) {
  // The registry keeps batch * M * N under 2^30, so 32-bit indices suffice.
  const int mn = p.M * p.N;
  const int total = mn * p.batch;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const int bidx = i / mn;
    const int rem = i - bidx * mn;
    const int row = rem / p.N;
    const int n = rem - row * p.N;
    float v = 0.0f;
    for (int s = 0; s < p.splits; ++s) v += p.partial[static_cast<int64_t>(s) * total + i];
    if (seen_after(stop, v)) return;
    float r = p.alpha * v;
    if (p.bias) r += p.bias[bidx * p.bias_batch_stride + n];
    const int64_t off = batch_offset(p, bidx, p.c_batch_stride, p.c_outer_stride) + c_index(p, row, n);
    if (p.residual) r += __half2float(p.residual[off]);
    p.c[off] = __float2half(apply_act(r, p.act));
  }
}

template <int BM, int BN, int WM, int WN, bool VEC, bool BKN>
void launch_tile(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
  using S = GemmTileShape<BM, BN, WM, WN, VEC, BKN>;
  // Read at the first launch, after prepare_tile raised the shared-memory limit.
  static const int per_sm = [] {
    int n = 0;
    ATL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemm_kernel<BM, BN, WM, WN, VEC, BKN, true>,
                                                                 S::kThreads, S::kSmemBytes));
    return std::max(n, 1);
  }();
  launch_tiled<BM, BN>(p, gemm_kernel<BM, BN, WM, WN, VEC, BKN, true>, gemm_kernel<BM, BN, WM, WN, VEC, BKN, false>,
                       per_sm, S::kThreads, S::kSmemBytes, s, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

template <int BM, int BN, int WM, int WN, bool VEC, bool BKN>
void prepare_tile() {
  using S = GemmTileShape<BM, BN, WM, WN, VEC, BKN>;
  ATL_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel<BM, BN, WM, WN, VEC, BKN, false>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  ATL_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel<BM, BN, WM, WN, VEC, BKN, true>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
}

// The instantiated variants: the fast vectorized [N, K] path in four tile sizes; scalar loads and
// the [K, N] layout (MatMul without trans_b) in 64x64 only, since they serve few, small kernels.
template <template <int, int, int, int, bool, bool> class Fn, typename... Args>
void dispatch(const GemmConfig& cfg, Args&&... args) {
  if (cfg.b_kn) {
    if (cfg.vec) return Fn<64, 64, 2, 2, true, true>::run(args...);
    return Fn<64, 64, 2, 2, false, true>::run(args...);
  }
  if (!cfg.vec) return Fn<64, 64, 2, 2, false, false>::run(args...);
  switch (cfg.tile) {
    case GemmTile::k128x128:
      return Fn<128, 128, 2, 4, true, false>::run(args...);
    case GemmTile::k128x64:
      return Fn<128, 64, 2, 2, true, false>::run(args...);
    case GemmTile::k64x64:
      return Fn<64, 64, 2, 2, true, false>::run(args...);
    case GemmTile::k32x64:
      return Fn<32, 64, 1, 2, true, false>::run(args...);
    default:
      ATOLL_THROW(kInternal, "wgmma tile given to the mma.sync kernel");
  }
}

template <int BM, int BN, int WM, int WN, bool VEC, bool BKN>
struct LaunchFn {
  static void run(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
    launch_tile<BM, BN, WM, WN, VEC, BKN>(p, s, flag, name);
  }
};
template <int BM, int BN, int WM, int WN, bool VEC, bool BKN>
struct PrepareFn {
  static void run() { prepare_tile<BM, BN, WM, WN, VEC, BKN>(); }
};

}  // namespace

int gemm_tile_m(GemmTile t) {
  switch (t) {
    case GemmTile::kGemv: return kGemvMaxRows;
    case GemmTile::k32x64: return 32;
    case GemmTile::k64x64:
    case GemmTile::kW64x128:
    case GemmTile::kW64x64: return 64;
    case GemmTile::kC256x256:
    case GemmTile::kC256x128:
    case GemmTile::kC256x512: return 256;
    default: return 128;
  }
}
int64_t gemm_launch_tiles(const GemmParams& p, GemmTile t) {
  const int bm = gemm_tile_m(t), bn = gemm_tile_n(t);
  return int64_t{(p.M + bm - 1) / bm} * ((p.N + bn - 1) / bn) * p.batch * p.splits;
}

int gemm_tile_n(GemmTile t) {
  switch (t) {
    case GemmTile::kT128x256:
    case GemmTile::kC256x256: return 256;
    case GemmTile::kC256x512: return 512;
    case GemmTile::k128x128:
    case GemmTile::kW128x128:
    case GemmTile::kW64x128:
    case GemmTile::kT128x128:
    case GemmTile::kP128x128:
    case GemmTile::kC256x128: return 128;
    default: return 64;  // k128x64, k64x64, k32x64, kW128x64, kW64x64, kT128x64, kD128x64
  }
}
int gemm_tile_k(GemmTile t) { return gemm_tile_is_wgmma(t) ? kWgmmaGemmTileK : kGemmTileK; }
bool gemm_tile_is_wgmma(GemmTile t) { return t >= GemmTile::kW128x128; }
bool gemm_tile_is_tma(GemmTile t) { return t >= GemmTile::kT128x128; }
bool gemm_tile_is_pingpong(GemmTile t) { return t == GemmTile::kP128x128; }
bool gemm_tile_is_dual(GemmTile t) { return t == GemmTile::kD128x64; }
bool gemm_tile_is_cluster(GemmTile t) {
  return t == GemmTile::kC256x256 || t == GemmTile::kC256x128 || t == GemmTile::kC256x512;
}

void prepare_gemm_kernel(const GemmConfig& cfg) {
  if (cfg.tile == GemmTile::kGemv) return;  // no dynamic shared memory
  if (gemm_tile_is_tma(cfg.tile)) return prepare_tma_gemm(cfg.tile);
  if (gemm_tile_is_wgmma(cfg.tile)) return prepare_wgmma_gemm(cfg.tile);
  dispatch<PrepareFn>(cfg);
}

void launch_gemm(const GemmParams& p, const GemmConfig& cfg, cudaStream_t s, const int* flag, const char* name) {
  ATOLL_CHECK(p.tile_end == 0 || cfg.tile != GemmTile::kGemv, kInternal, "kernel '{}': a slice of a GEMV launch", name);
  if (cfg.tile == GemmTile::kGemv) {
    launch_gemv(p, s, flag, name);  // one split: no partials to reduce
    return;
  }
  if (gemm_tile_is_tma(cfg.tile)) {
    launch_tma_gemm(p, cfg.tile, s, flag, name);
  } else if (gemm_tile_is_wgmma(cfg.tile)) {
    launch_wgmma_gemm(p, cfg.tile, s, flag, name);
  } else {
    dispatch<LaunchFn>(cfg, p, s, flag, name);
  }
  // A slice's partials are summed once the slice that ends at the last tile has run.
  if (p.splits > 1 && (p.tile_end == 0 || p.tile_end == gemm_launch_tiles(p, cfg.tile))) {
    const int64_t total = static_cast<int64_t>(p.M) * p.N * p.batch;
    split_reduce_kernel<<<blocks_for(total, 256), 256, 0, s>>>(p, flag);
    ATL_CUDA_CHECK_LAUNCH(name);
  }
}

}  // namespace atl::cuda
