// Hopper tensor-core GEMM and implicit-GEMM convolution: warpgroup MMAs (wgmma, sm_90a) reading
// both operands from shared memory in the 128-byte swizzled K-major layout, fed by a cp.async
// pipeline that computes the implicit im2col addresses exactly as the mma.sync kernel does (so
// every convolution the vectorized path takes runs here too), with the same fused epilogue
// (staged through the freed stages, wgmma_epilogue.cuh), split-K partials and preemption checks.
// One to two warpgroups per block, each owning 64 rows.
//
// Why cp.async rather than TMA: the A operand of a convolution is an implicit im2col whose rows
// start anywhere in the image; cp.async keeps that address arithmetic shared with the mma.sync
// kernel, and wgmma, not the loads, was what the mma.sync kernel lacked (docs/PERFORMANCE.md).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"
#include "backends/cuda/gemm_common.cuh"
#include "backends/cuda/wgmma.cuh"
#include "backends/cuda/wgmma_epilogue.cuh"

namespace atl::cuda {

namespace {

using namespace gemm;

constexpr int kWgBK = 64;             // one 128-byte swizzle row of halves
constexpr int kRowBytes = kWgBK * 2;  // bytes per smem row of a stage
constexpr int kChunksPerRow = kRowBytes / 16;
template <int BM, int BN, int STAGES>
struct WgShape {
  static constexpr int kWarpGroups = BM / 64;
  static constexpr int kThreads = kWarpGroups * 128;
  static constexpr int kAStageBytes = BM * kRowBytes;
  static constexpr int kBStageBytes = BN * kRowBytes;
  static constexpr int kStageBytes = kAStageBytes + kBStageBytes;
  // Swizzle atoms must start 1024-byte aligned; the slack lets the kernel round the base up.
  static constexpr int kSmemBytes = STAGES * kStageBytes + 1024;
  static constexpr int kAChunks = BM * kChunksPerRow / kThreads;  // 16-byte copies per thread per stage
  static constexpr int kBChunks = BN * kChunksPerRow / kThreads;
  static constexpr int kRowStep = kThreads / kChunksPerRow;       // rows between one thread's copies
  static_assert(BM % 64 == 0 && (BN == 64 || BN == 128), "wgmma tiles: 64 rows per warpgroup, N 64 or 128");
  static_assert(STAGES >= 3, "the pipeline keeps STAGES - 2 tiles in flight");
  static_assert(kAChunks >= 1 && kBChunks >= 1 && kRowStep % 8 == 0, "a thread's rows share one swizzle phase");
  static_assert(STAGES * kStageBytes >= kWarpGroups * kEpiBufBytes, "the stages hold the epilogue buffers");
};

#if defined(ATL_WGMMA_DEVICE)

// The flag is re-read every this many K tiles: the same K distance as the mma.sync kernel's
// check (4 tiles of 32), about 0.3-1 us of MMA work per check on a 128x128 tile.
constexpr int kWgCheckTiles = 2;

// Byte offset of 16-byte chunk `chunk` of smem row `row` under the 128-byte swizzle (chunk index
// XOR row mod 8), the layout sw128_desc describes.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return static_cast<uint32_t>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}


// One output tile; returns true when the block saw the flag and stopped (outputs then partial).
template <int BM, int BN, int STAGES>
__device__ __forceinline__ bool wgmma_tile(const GemmParams& p, const int* flag, int& flag_seen, int bx, int by,
                                           int bz, uint32_t smem) {
  using S = WgShape<BM, BN, STAGES>;
  const int tid = threadIdx.x;
  const int wg = tid / 128;
  const int m0 = bx * BM, n0 = by * BN;
  const int split = bz % p.splits;
  const int bidx = bz / p.splits;
  const int k_tiles = (p.K + kWgBK - 1) / kWgBK;
  const int kt_begin = split * p.k_tiles_per_split;
  const int n_tiles = max(min(k_tiles, kt_begin + p.k_tiles_per_split) - kt_begin, 0);
  const __half* A = p.a + batch_offset(p, bidx, p.a_batch_stride, p.a_outer_stride);
  const __half* B = p.b + batch_offset(p, bidx, p.b_batch_stride, p.b_outer_stride);
  const EpilogueTarget target = epilogue_target(p, bidx, split, n0);
  prefetch_residual(p, target, m0, n0, BM, BN, tid, S::kThreads);

  // A thread copies chunk `chunk` of rows row0, row0 + kRowStep, ...: all in one swizzle phase.
  const int row0 = tid / kChunksPerRow;
  const int chunk = tid % kChunksPerRow;
  const uint32_t dst0 = swizzled(row0, chunk);
  RowOrigin rows[S::kAChunks];
#pragma unroll
  for (int i = 0; i < S::kAChunks; ++i) rows[i] = row_origin(p, A, m0 + row0 + i * S::kRowStep);

  auto issue_loads = [&](int stage, int kt) {
    const uint32_t a_dst = smem + stage * S::kStageBytes + dst0;
    const uint32_t b_dst = a_dst + S::kAStageBytes;
    const int k = kt * kWgBK + chunk * 8;
    const ColTap tap = col_tap(p, k);
#pragma unroll
    for (int i = 0; i < S::kAChunks; ++i) {
      bool valid;
      const __half* src = tap_address(p, rows[i], tap, valid);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a_dst + i * S::kRowStep * kRowBytes),
                   "l"(src), "r"(valid ? 16 : 0));
    }
#pragma unroll
    for (int i = 0; i < S::kBChunks; ++i) {
      const int n = n0 + row0 + i * S::kRowStep;
      const bool valid = n < p.N && k < p.K;
      const __half* src = valid ? B + static_cast<int64_t>(n) * p.ldb + k : B;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(b_dst + i * S::kRowStep * kRowBytes),
                   "l"(src), "r"(valid ? 16 : 0));
    }
  };

  constexpr int kAcc = BN / 2;  // accumulator floats per thread
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

  // Tile t lives in stage t % STAGES. Loads run STAGES - 2 tiles ahead: the stage refilled at
  // tile t held tile t - 2, whose wgmmas every warpgroup has retired (wait_group 1 at tile t - 1)
  // before the barrier of tile t.
  constexpr int kAhead = STAGES - 2;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < n_tiles) issue_loads(s, kt_begin + s);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kAhead - 1>();
    fence_proxy_async_shared();
    if (flag != nullptr && t % kWgCheckTiles == 0) {
      if (__syncthreads_or(flag_seen)) {
        cp_async_wait<0>();
        wgmma_wait<0>();
        return true;
      }
      if (tid == 0) flag_seen = load_flag(flag);
    } else {
      __syncthreads();
    }
    const int next = t + kAhead;
    if (next < n_tiles) issue_loads(next % STAGES, kt_begin + next);
    cp_async_commit();

    const uint32_t a_tile = smem + (t % STAGES) * S::kStageBytes + wg * 64 * kRowBytes;
    const uint32_t b_tile = smem + (t % STAGES) * S::kStageBytes + S::kAStageBytes;
    const uint64_t da = sw128_desc(a_tile), db = sw128_desc(b_tile);
    fence_registers(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgBK / 16; ++kk) {
      // 16 halves = 32 bytes along K: descriptor addresses count 16-byte units.
      wgmma_m64nNk16<BN>(acc, da + 2 * kk, db + 2 * kk);
    }
    wgmma_commit();
    wgmma_wait<1>();
    fence_registers(acc);
  }
  wgmma_wait<0>();
  fence_registers(acc);
  cp_async_wait<0>();
  // Every thread's copies have landed and every warpgroup's MMAs have retired: after this
  // barrier the stages hold the epilogue buffers (a persistent block's next tile refills them
  // only after the barrier that starts it). It also tests the flag the last check read, so a
  // stopped tile skips its epilogue, and the read issued now is what the epilogue's first check
  // tests (before it, the next tile's first check did: a raise meanwhile cost the whole epilogue).
  if (flag != nullptr) {
    if (__syncthreads_or(flag_seen)) return true;
    if (tid == 0) flag_seen = load_flag(flag);
  } else {
    __syncthreads();
  }
  float* buffers = reinterpret_cast<float*>(__cvta_shared_to_generic(smem));
  const auto stop_check = [&] {
    if (__syncthreads_or(flag_seen)) return true;
    if (flag != nullptr && tid == 0) flag_seen = load_flag(flag);
    return false;
  };
  return staged_epilogue<BN>(p, target, m0 + wg * 64, n0, acc,
                             buffers + wg * (kEpiBufBytes / 4), tid % 128, wg, stop_check);
}

#endif  // ATL_WGMMA_DEVICE

// Same grid contract as the mma.sync kernel (gemm_common.cuh, for_each_tile).
template <int BM, int BN, int STAGES, bool PERSISTENT>
__global__ void __launch_bounds__(WgShape<BM, BN, STAGES>::kThreads)
    wgmma_gemm_kernel(const GemmParams p, const int* flag) {
#if defined(ATL_WGMMA_DEVICE)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t smem = (smem_addr(smem_raw) + 1023u) & ~1023u;
  int flag_seen = (flag != nullptr && threadIdx.x == 0) ? load_flag(flag) : 0;
  for_each_tile<BM, BN, PERSISTENT>(p, flag, flag_seen, [&](int bx, int by, int bz) {
    return wgmma_tile<BM, BN, STAGES>(p, flag, flag_seen, bx, by, bz, smem);
  });
#else
  // Built without sm_90a: the planner never offers these tiles (DeviceInfo::wgmma).
  __trap();
#endif
}

template <int BM, int BN, int STAGES>
struct WgVariant {
  using S = WgShape<BM, BN, STAGES>;
  static void prepare() {
    ATL_CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm_kernel<BM, BN, STAGES, false>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
    ATL_CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm_kernel<BM, BN, STAGES, true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  }
  static void launch(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
    static const int per_sm = [] {
      int n = 0;
      ATL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgmma_gemm_kernel<BM, BN, STAGES, true>,
                                                                   S::kThreads, S::kSmemBytes));
      return std::max(n, 1);
    }();
    launch_tiled<BM, BN>(p, wgmma_gemm_kernel<BM, BN, STAGES, true>, wgmma_gemm_kernel<BM, BN, STAGES, false>, per_sm,
                         S::kThreads, S::kSmemBytes, s, flag);
    ATL_CUDA_CHECK_LAUNCH(name);
  }
};

// 128-row tiles take five stages (one block per SM at 128 columns); 64-row tiles four, so two or
// three blocks share an SM and overlap each other's loads and epilogues.
template <typename Fn>
void dispatch_wgmma(GemmTile tile, Fn&& fn) {
  switch (tile) {
    case GemmTile::kW128x128: return fn(WgVariant<128, 128, 5>{});
    case GemmTile::kW128x64: return fn(WgVariant<128, 64, 4>{});
    case GemmTile::kW64x128: return fn(WgVariant<64, 128, 4>{});
    case GemmTile::kW64x64: return fn(WgVariant<64, 64, 4>{});
    default: ATOLL_THROW(kInternal, "not a wgmma tile");
  }
}

}  // namespace

bool wgmma_gemm_built() {
#if defined(ATL_CUDA_WGMMA)
  return true;
#else
  return false;
#endif
}

void prepare_wgmma_gemm(GemmTile tile) {
  dispatch_wgmma(tile, [](auto v) { decltype(v)::prepare(); });
}

void launch_wgmma_gemm(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name) {
  dispatch_wgmma(tile, [&](auto v) { decltype(v)::launch(p, s, flag, name); });
}

}  // namespace atl::cuda
