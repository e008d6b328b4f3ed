// Hopper GEMM fed by the Tensor Memory Accelerator, for operands that are plain row-major
// matrices (Gemm, MatMul with trans_b, 1x1 stride-1 convolutions) or an implicit im2col the TMA
// unit walks itself (convolutions of 64k channels per group of one: tma_gemm_applies). One
// producer thread issues TMA copies of 64-wide K tiles into a ring of shared-memory stages, each
// guarded by a "full" and an "empty" mbarrier; two consumer warpgroups (64 rows each) run wgmma on
// them, with the fused epilogue (staged through shared memory, wgmma_epilogue.cuh) and split-K
// of the other GEMM kernels. Blocks
// are persistent (one per SM) and walk the output tiles in the order an uncapped grid would
// launch them. A convolution's K tile is 64 channels of one filter tap (so cg must be a multiple
// of 64), loaded in the TMA's im2col mode: the map's bounding box is the range of window corners
// the output pixels start at, and the tap is the copy's offset. The cp.async kernel
// (gemm_sm90.cu) keeps the other convolutions.
//
// Preemption: the consumers read the flag every p.check_tiles K tiles (one thread's read,
// issued a check ahead and OR-ed over a named barrier of the 256 consumer threads). On a raise
// they stop at once and tell the producer through a shared word; it stops issuing and waits for
// the copies in flight, which must land before the block's shared memory is released. The
// epilogue checks too, every p.epi_check_chunks of its chunks (wgmma_epilogue.cuh).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm_common.cuh"
#include "backends/cuda/tma_gemm_common.cuh"
#include "backends/cuda/tma_maps.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

using namespace gemm;

#if defined(ATL_WGMMA_DEVICE)

template <int BN>
constexpr int kTmaAcc = BN / 2;  // accumulator floats per consumer thread

// The stage ring: STAGES stages, the epilogue buffers, then STAGES "full" barriers, STAGES
// "empty" ones, the stop word, the ping-pong consumers' turn word.
template <int STAGES>
struct Ring {
  uint32_t stages, bars;
  float* epilogue;  // two buffers of kEpiBufBytes, one per consumer warpgroup
  int* stop;
  int* turn;  // ping-pong: how many of the block's tiles have finished their K loop
  __device__ uint32_t full(int s) const { return bars + 8u * s; }
  __device__ uint32_t empty(int s) const { return bars + 8u * (STAGES + s); }
  // The stop word crosses warps with no barrier between them, so both sides use atomic
  // read-modify-writes: a volatile (or relaxed ld/st) pair is a data race that compute-sanitizer's
  // racecheck reports. Shared-memory atomics cost the producer's one spinning thread little.
  __device__ void raise_stop() const { atomicExch(stop, 1); }
  __device__ bool stop_raised() const { return atomicOr(stop, 0) != 0; }
  __device__ int turns_done() const { return atomicOr(turn, 0); }
  __device__ void pass_turn(int done) const { atomicExch(turn, done); }
};

template <int BN, int STAGES, bool IM2COL>
__device__ void tma_produce(const GemmParams& p, const CUtensorMap* map_a, const CUtensorMap* map_b,
                            const Ring<STAGES>& ring, int tiles) {
  using S = TmaShape<BN, STAGES>;
  tma_prefetch_map(map_a);
  tma_prefetch_map(map_b);
  int it = 0;
  bool stopped = false;
  for (int t = p.tile_begin + static_cast<int>(blockIdx.x); t < tiles && !stopped; t += gridDim.x) {
    const TileCoords c = walk_tile_coords(p, kTmaBM, BN, t);
    const WindowCorner corner = IM2COL ? window_corner(p, c.m0) : WindowCorner{};
    for (int kt = 0; kt < c.k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      // The consumers release stage s after its previous use; a stopped consumer never will.
      const uint32_t parity = ((it / STAGES) & 1) ^ 1;
      while (!mbar_done(ring.empty(s), parity) && !ring.stop_raised()) {
      }
      if (ring.stop_raised()) {
        stopped = true;
        break;
      }
      const uint32_t dst = ring.stages + s * S::kStageBytes;
      const int k0 = (c.kt_begin + kt) * kTmaBK;
      mbar_arrive_expect_tx(ring.full(s), S::kStageBytes);
      tma_load_a<IM2COL>(p, map_a, dst, k0, c.m0, corner, ring.full(s));
      tma_load_2d(dst + S::kABytes, map_b, k0, c.n0, ring.full(s));
      if (kt == 0) prefetch_tile_residual(p, c, BN);
    }
  }
  // Every copy issued lands before the block exits: the latest use of each stage.
  for (int j = max(0, it - STAGES); j < it; ++j) mbar_wait(ring.full(j % STAGES), (j / STAGES) & 1);
}

template <int BN, int STAGES>
__device__ void tma_consume(const GemmParams& p, const int* flag, int pending, const Ring<STAGES>& ring, int tiles) {
  using S = TmaShape<BN, STAGES>;
  const int ctid = static_cast<int>(threadIdx.x) - 128;
  const int wg = ctid / 128;
  const bool leader = ctid % 128 == 0;  // releases stages for its warpgroup
  int it = 0;
  for (int t = p.tile_begin + static_cast<int>(blockIdx.x); t < tiles; t += gridDim.x) {
    const TileCoords c = walk_tile_coords(p, kTmaBM, BN, t);
    float acc[kTmaAcc<BN>];
#pragma unroll
    for (int i = 0; i < kTmaAcc<BN>; ++i) acc[i] = 0.0f;
    for (int kt = 0; kt < c.k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(ring.full(s), (it / STAGES) & 1);
      if (flag != nullptr && (kt & (p.check_tiles - 1)) == 0) {
        if (named_barrier_or<1, kTmaConsumerThreads>(pending != 0)) {
          wgmma_wait<0>();
          if (ctid == 0) ring.raise_stop();
          return;
        }
        if (ctid == 0) pending = load_flag(flag);
      }
      tma_mma_k_tile<BN>(acc, ring.stages + s * S::kStageBytes, S::kABytes, wg);
      // The previous K tile's MMAs have retired: its stage may be refilled.
      if (kt > 0 && leader) mbar_arrive(ring.empty((it - 1) % STAGES));
    }
    wgmma_wait<0>();
    fence_registers(acc);
    if (c.k_tiles > 0 && leader) mbar_arrive(ring.empty((it - 1) % STAGES));
    // A flag the tile's last check read stops the block before its epilogue, and a read issued
    // now, in flight while the first chunks run, is what the epilogue's first check tests (the
    // next tile's first check, before it: a flag raised meanwhile cost the whole epilogue, and
    // ResNet-50 b32's one-wave 1x1 GEMMs exited in up to 23 us on the H200).
    if (flag != nullptr) {
      if (named_barrier_or<1, kTmaConsumerThreads>(pending != 0)) {
        if (ctid == 0) ring.raise_stop();
        return;
      }
      if (ctid == 0) pending = load_flag(flag);
    }

    const auto stop_check = [&] {
      // Both warpgroups meet here (the chunk's barrier) and stop together.
      if (named_barrier_or<1, kTmaConsumerThreads>(pending != 0)) return true;
      if (flag != nullptr && ctid == 0) pending = load_flag(flag);
      return false;
    };
    if (staged_epilogue<BN>(p, epilogue_target(p, 0, c.split, c.n0), c.m0 + wg * 64, c.n0, acc,
                            ring.epilogue + wg * (kEpiBufBytes / 4), ctid % 128, wg, stop_check)) {
      if (ctid == 0) ring.raise_stop();
      return;
    }
  }
}

// A barrier of one consumer warpgroup that ORs `v` over its threads (ids 4 and 5: the epilogue
// holds 2 and 3, the cooperative consumers 1).
__device__ __forceinline__ bool warpgroup_or(int wg, bool v) {
  return wg == 0 ? named_barrier_or<4, 128>(v) : named_barrier_or<5, 128>(v);
}

// The ping-pong consumers: each warpgroup runs whole 128 x 128 tiles, the block's even tiles on
// the first and odd ones on the second, so one warpgroup's epilogue runs while the other's MMAs
// do. The stages come in the block's tile order, and a warpgroup starts its tile's K loop only
// when every earlier tile's K loop is done (the turn word): an mbarrier parity wait cannot tell
// a phase from the one two phases later, so waiting on a stage a whole ring ahead of the
// producer would pass on an old fill. Each checks the flag on its own; a stopped one raises the
// stop word, which the producer and the other warpgroup (waiting for its turn or on a stage that
// may not come) poll.
template <int STAGES>
__device__ void tma_consume_pingpong(const GemmParams& p, const int* flag, int pending, const Ring<STAGES>& ring,
                                     int tiles) {
  using S = TmaShape<128, STAGES>;
  const int ctid = static_cast<int>(threadIdx.x) - 128;
  const int wg = ctid / 128, wtid = ctid % 128;
  const bool leader = wtid == 0;
  int it = 0;  // ring position of the next K tile, over both warpgroups' tiles
  int local = 0;
  for (int t = p.tile_begin + static_cast<int>(blockIdx.x); t < tiles; t += gridDim.x, ++local) {
    const TileCoords c = walk_tile_coords(p, kTmaBM, 128, t);
    if (local % 2 != wg) {
      it += c.k_tiles;
      continue;
    }
    bool other_stopped = false;
    if (leader) {
      while (ring.turns_done() < local && !other_stopped) other_stopped = ring.stop_raised();
    }
    if (warpgroup_or(wg, other_stopped)) return;  // the other warpgroup stopped and raised the word
    float acc[2][kTmaAcc<128>];
#pragma unroll
    for (int i = 0; i < kTmaAcc<128>; ++i) acc[0][i] = acc[1][i] = 0.0f;
    for (int kt = 0; kt < c.k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      // The stage, or the stop word: a stopped block's producer fills no more stages.
      bool stopped = false;
      for (int spins = 0; !mbar_done(ring.full(s), (it / STAGES) & 1); ++spins) {
        if (spins % 64 == 63 && ring.stop_raised()) {
          stopped = true;
          break;
        }
      }
      // One decision per K tile for the whole warpgroup: a thread that left alone would hang the
      // others at their next barrier. The leader's flag read, every p.check_tiles, rides along.
      // Without a flag nothing raises the stop word.
      if (flag != nullptr && warpgroup_or(wg, stopped || pending != 0)) {
        wgmma_wait<0>();
        if (leader) ring.raise_stop();
        return;
      }
      if (flag != nullptr && leader && (kt & (p.check_tiles - 1)) == 0) pending = load_flag(flag);
      const uint32_t stage = ring.stages + s * S::kStageBytes;
      const uint64_t da0 = sw128_desc(stage), da1 = sw128_desc(stage + 64 * kTmaRowBytes);
      const uint64_t db = sw128_desc(stage + S::kABytes);
      fence_registers(acc[0]);
      fence_registers(acc[1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kTmaBK / 16; ++kk) {
        wgmma_m64nNk16<128>(acc[0], da0 + 2 * kk, db + 2 * kk);
        wgmma_m64nNk16<128>(acc[1], da1 + 2 * kk, db + 2 * kk);
      }
      wgmma_commit();
      wgmma_wait<1>();
      fence_registers(acc[0]);
      fence_registers(acc[1]);
      if (kt > 0 && leader) mbar_arrive(ring.empty((it - 1) % STAGES));
    }
    if (leader) ring.pass_turn(local + 1);  // every stage of this tile has been waited on
    wgmma_wait<0>();
    fence_registers(acc[0]);
    fence_registers(acc[1]);
    if (c.k_tiles > 0 && leader) mbar_arrive(ring.empty((it - 1) % STAGES));
    // As in tma_consume: the last check's read stops the tile before its epilogue.
    if (flag != nullptr) {
      if (warpgroup_or(wg, pending != 0)) {
        if (leader) ring.raise_stop();
        return;
      }
      if (leader) pending = load_flag(flag);
    }
    const auto stop_check = [&] {
      if (warpgroup_or(wg, pending != 0)) return true;
      if (flag != nullptr && leader) pending = load_flag(flag);
      return false;
    };
    const EpilogueTarget target = epilogue_target(p, 0, c.split, c.n0);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // unrolled: acc[h] stays in registers
      if (staged_epilogue<128>(p, target, c.m0 + h * 64, c.n0, acc[h], ring.epilogue + wg * (kEpiBufBytes / 4), wtid,
                               wg, stop_check)) {
        if (leader) ring.raise_stop();
        return;
      }
    }
  }
}

#endif  // ATL_WGMMA_DEVICE

// BLOCKS: the blocks each SM holds (1 or 2). The producer warpgroup gives registers to the
// consumers (setmaxnreg) within the block's share of the register file: 168 per thread at launch
// for one block, 80 for two (the consumers spilled at 80 and do not at 96; the im2col producer
// spilled at 24).
template <int BLOCKS>
struct TmaRegisters {
  static constexpr int kProducer = 40;
  static constexpr int kConsumer = BLOCKS == 1 ? 232 : 96;
  static_assert(128 * kProducer + kTmaConsumerThreads * kConsumer <= 65536 / BLOCKS, "registers of one block");
};

template <int BN, int STAGES, bool IM2COL, bool PINGPONG, int BLOCKS>
__global__ void __launch_bounds__(kTmaThreads, BLOCKS)
    tma_gemm_kernel(const GemmParams p, const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b, const int* flag) {
#if defined(ATL_WGMMA_DEVICE)
  using S = TmaShape<BN, STAGES>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  Ring<STAGES> ring;
  ring.stages = (raw + 1023u) & ~1023u;
  ring.epilogue = reinterpret_cast<float*>(smem_raw + (ring.stages + STAGES * S::kStageBytes - raw));
  ring.bars = ring.stages + STAGES * S::kStageBytes + 2 * kEpiBufBytes;
  ring.stop = reinterpret_cast<int*>(smem_raw + (ring.bars + 16 * STAGES - raw));
  ring.turn = ring.stop + 1;
  const int tid = static_cast<int>(threadIdx.x);
  // The first consumer's entry read, in flight while the barriers are set up and the first
  // stage loads.
  const bool reader = tid == 128 || (PINGPONG && tid == 256);  // a consumer warpgroup's leader
  int pending = (flag != nullptr && reader) ? load_flag(flag) : 0;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(ring.full(s), 1);
      mbar_init(ring.empty(s), PINGPONG ? 1 : 2);  // one arrival per warpgroup reading the stage
    }
    *ring.stop = 0;
    *ring.turn = 0;
    mbar_init_fence();
  }
  __syncthreads();
  const int tiles = tile_range_end(p, ((p.M + kTmaBM - 1) / kTmaBM) * ((p.N + BN - 1) / BN) * p.splits);
  if (tid < 128) {
    warpgroup_reg_dealloc<TmaRegisters<BLOCKS>::kProducer>();
    if (tid == 0) tma_produce<BN, STAGES, IM2COL>(p, &map_a, &map_b, ring, tiles);
    return;
  }
  warpgroup_reg_alloc<TmaRegisters<BLOCKS>::kConsumer>();
  if constexpr (PINGPONG) {
    static_assert(BN == 128, "ping-pong tiles: 128 x 128 per warpgroup");
    tma_consume_pingpong<STAGES>(p, flag, pending, ring, tiles);
  } else {
    tma_consume<BN, STAGES>(p, flag, pending, ring, tiles);
  }
#else
  // Built without sm_90a: the planner never offers these tiles (DeviceInfo::wgmma).
  __trap();
#endif
}

template <int BN, int STAGES, bool PINGPONG = false, int BLOCKS = 1>
struct TmaVariant {
  using S = TmaShape<BN, STAGES>;
  // An SM's 228 KB of shared memory, less 1 KB the runtime reserves per block.
  static_assert(BLOCKS * (S::kSmemBytes + 1024) <= 228 * 1024, "shared memory of the blocks an SM holds");
  static void prepare() {
    for (const auto kernel : {tma_gemm_kernel<BN, STAGES, false, PINGPONG, BLOCKS>,
                              tma_gemm_kernel<BN, STAGES, true, PINGPONG, BLOCKS>}) {
      ATL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
    }
  }
  static void launch(const GemmParams& p, cudaStream_t s, const int* flag, const char* name) {
    ATOLL_CHECK(tma_gemm_applies(p), kInternal, "kernel '{}': TMA tile given to a GEMM whose operands it cannot read",
                name);
    const bool plain = tma_reads_plain_a(p);
    const CUtensorMap map_a = plain ? matrix_map({p.a, p.M, p.K, p.in_c, kTmaBM}, name) : im2col_map(p, name);
    const CUtensorMap map_b = matrix_map({p.b, p.N, p.K, p.ldb, BN}, name);
    const int64_t tiles = int64_t{(p.M + kTmaBM - 1) / kTmaBM} * ((p.N + BN - 1) / BN) * p.splits;
    const unsigned grid = persistent_grid(p, tiles, int64_t{device_sm_count()} * BLOCKS);
    const auto kernel = plain ? tma_gemm_kernel<BN, STAGES, false, PINGPONG, BLOCKS>
                              : tma_gemm_kernel<BN, STAGES, true, PINGPONG, BLOCKS>;
    kernel<<<grid, kTmaThreads, S::kSmemBytes, s>>>(p, map_a, map_b, flag);
    ATL_CUDA_CHECK_LAUNCH(name);
  }
};

// 128x64 takes eight stages of 24 KB, or three with two blocks per SM; 128x128 (either consumer
// scheme) six of 32 KB; 128x256 four of 48 KB.
template <typename Fn>
void dispatch_tma(GemmTile tile, Fn&& fn) {
  switch (tile) {
    case GemmTile::kP128x128:
      return fn(TmaVariant<128, 6, true>{});
    case GemmTile::kT128x64:
      return fn(TmaVariant<64, 8>{});
    case GemmTile::kT128x128:
      return fn(TmaVariant<128, 6>{});
    case GemmTile::kT128x256:
      return fn(TmaVariant<256, 4>{});
    case GemmTile::kD128x64:
      return fn(TmaVariant<64, 3, false, 2>{});
    default:
      ATOLL_THROW(kInternal, "not a TMA tile");
  }
}

}  // namespace

void prepare_tma_gemm(GemmTile tile) {
  if (gemm_tile_is_cluster(tile)) return prepare_cluster_gemm(tile);
  dispatch_tma(tile, [](auto v) { decltype(v)::prepare(); });
}

void launch_tma_gemm(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name) {
  if (gemm_tile_is_cluster(tile)) return launch_cluster_gemm(p, tile, s, flag, name);
  dispatch_tma(tile, [&](auto v) { decltype(v)::launch(p, s, flag, name); });
}

}  // namespace atl::cuda
