// The TMA GEMM on clusters of blocks that share operands: a 256 x BN tile on two blocks (BN 256 or
// 128: c256x256, c256x128), each 128 rows of it, sharing B; or a 256 x 512 tile on 2 x 2 blocks
// (c256x512), each 128 x 256, the blocks of a row sharing A and those of a column B. Every K
// tile, each producer loads its part of each shared operand (half of B's rows; with 2 x 2, half
// of A's) and multicasts it into the same stage of the blocks that share it. So a block takes 32
// KB per K tile from L2 (24 KB with 2 x 2) instead of t128x256's 48 KB, of which B is two thirds:
// the large-batch 3x3 convolutions that run on t128x256 pull ~5.7 TB/s from L2 on the H200
// (docs/PERFORMANCE.md, session 23). Operands, epilogue and split-K are gemm_sm90_tma.cu's.
//
// A stage of a block is written by several producers, so each producer waits until the
// consumers of every block it writes into have released the stage: each consumer warpgroup
// arrives on its stage's "empty" barrier in each block that writes into it. Each block's "full"
// barrier counts every part of its A and B, whoever loaded it.
//
// Preemption: the blocks must stop at the same K tile, or one would wait forever for another's
// part of an operand. So only the first block's producer reads the flag; for every stage it fills
// it sends each other block's producer a token (run or halt) through distributed shared memory,
// and all then fill the stage with operands or, on halt, with a halt word their consumers read
// after waiting on it, and fill no more. The flag read issued
// after a stage's copies decides the stage after next; an entry read decides the first stage, so
// a kernel launched under a raised flag writes nothing. Consumers make no check of their own: a
// raise ends the kernel within the stages in flight and at most one tile's epilogue (a few
// microseconds). No block leaves while another may still arrive on its barriers or copy into its
// stages: the kernel ends with a cluster barrier.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/tma_gemm_common.cuh"
#include "core/error.h"

namespace atl::cuda {

namespace {

using namespace gemm;

constexpr int kClusterRows = 2 * kTmaBM;  // output rows of a cluster's tile
// setmaxnreg's split of one block's registers: the producer's token exchange needs more than the
// TMA tiles' 40 (it spilled there, and at 48 with 2 x 2 blocks), and the consumers' 64 or 128
// accumulators fit in 224.
constexpr int kClusterProducerRegs = 56;
constexpr int kClusterConsumerRegs = 224;
static_assert(128 * kClusterProducerRegs + 256 * kClusterConsumerRegs <= 65536, "registers of one block");

// A cluster tile 256 rows by CN x BN columns on 2 x CN blocks, each 128 x BN: four stages of 48
// KB at BN 256, six of 32 KB at 128, as the TMA tiles of the same width. Block `rank` holds rows
// 128 (rank % 2) and columns BN (rank / 2) of the tile. Blocks of a column of the cluster (the
// same columns) share B, blocks of a row (CN 2: the same rows) share A: each loads its part of a
// shared operand and multicasts it to the blocks that share it.
template <int BN, int CN>
struct ClusterShape {
  static_assert(CN == 1 || CN == 2, "clusters of 2 x 1 or 2 x 2 blocks");
  static constexpr int kBN = BN;
  static constexpr int kCN = CN;
  static constexpr int kBlocks = 2 * CN;
  static constexpr int kTileN = CN * BN;  // output columns of the cluster's tile
  static constexpr int kStages = BN == 256 ? 4 : 6;
  using Tma = TmaShape<BN, kStages>;
  static constexpr int kABytes = Tma::kABytes;
  static constexpr int kAPartRows = kTmaBM / CN;  // A rows each block loads (and multicasts when CN 2)
  static constexpr int kAPartBytes = kABytes / CN;
  static constexpr int kBHalfRows = BN / 2;  // B rows each block loads and multicasts
  static constexpr int kBHalfBytes = Tma::kBBytes / 2;
  static constexpr int kStageBytes = Tma::kStageBytes;
  // Consumer warpgroups whose release a producer waits for: those of every block it writes into
  // (itself, the block sharing its B and, CN 2, the one sharing its A).
  static constexpr int kEmptyArrivals = 2 * (1 + CN);
  // Stages, the two epilogue buffers, the full, empty and token barriers, the halt and token words
  // of each stage, and 1 KB of slack to align the stages to the swizzle atom.
  static constexpr int kSmemBytes = kStages * kStageBytes + 2 * kEpiBufBytes + 3 * 8 * kStages + 2 * 4 * kStages + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");
  static_assert(kBHalfBytes % 1024 == 0 && kAPartBytes % 1024 == 0, "each part starts on a swizzle atom");
};

#if defined(ATL_WGMMA_DEVICE)

// The first producer tests the flag read issued after stage i's copies only after stage i + 1's,
// and it decides stage i + 2: waiting for it then overlaps the wait for a free stage, where testing
// it before stage i + 1's copies delayed every fill by an L2 round trip (session 37, the TMA
// tiles' halt tokens, since removed: their flag cost rose either way).
struct StageHaltSchedule {
  int pending;     // the read in flight
  bool halt_next;  // whether the next stage filled is a halt
  __device__ __forceinline__ void after_fill(const int* flag) {
    halt_next = pending != 0;
    pending = load_flag(flag);
  }
};

// Writes stage `s`'s halt word (0: operands follow) before the producer's arrival on the stage's
// full barrier, which the consumers wait on before they read it; a halt completes the phase with no
// bytes. Returns `halt`.
__device__ __forceinline__ bool fill_halt_word(int* halt_words, int s, uint32_t full_bar, bool halt) {
  halt_words[s] = halt ? 1 : 0;
  if (halt) mbar_arrive(full_bar);
  return halt;
}

template <class S>
struct ClusterRing {
  uint32_t stages, bars;
  float* epilogue;  // two buffers of kEpiBufBytes, one per consumer warpgroup
  // Per stage: whether the producer filled it with a halt word instead of operands; written
  // before its arrival on the stage's full barrier, read by the consumers after their wait.
  int* halt;
  // Per stage, in every block but the first: the first block's decision for the stage, written
  // through distributed shared memory before its arrival on the stage's token barrier.
  int* token;
  uint32_t token_addr;  // shared address of token[0]
  __device__ uint32_t full(int s) const { return bars + 8u * s; }
  __device__ uint32_t empty(int s) const { return bars + 8u * (S::kStages + s); }
  __device__ uint32_t token_bar(int s) const { return bars + 8u * (2 * S::kStages + s); }
};

// Unit `u` of the walk, a cluster tile (split), and block `rank`'s 128 x BN of it.
template <class S>
__device__ __forceinline__ TileCoords cluster_tile_coords(const GemmParams& p, int u, uint32_t rank) {
  TileCoords c = walk_tile_coords(p, kClusterRows, S::kTileN, u);
  c.m0 += static_cast<int>(rank % 2) * kTmaBM;
  c.n0 += static_cast<int>(rank / 2) * S::kBN;
  return c;
}

// The first block's producer decides whether stage `s` halts and tells the others'.
template <class S>
__device__ __forceinline__ bool stage_halts(const ClusterRing<S>& ring, int s, int it, uint32_t rank, bool halt_next) {
  if (rank == 0) {
#pragma unroll
    for (uint32_t r = 1; r < S::kBlocks; ++r) {
      st_cluster(ring.token_addr + 4u * s, r, halt_next ? 1 : 0);
      mbar_arrive_cluster(ring.token_bar(s), r);  // releases the token's write
    }
    return halt_next;
  }
  mbar_wait<true>(ring.token_bar(s), (it / S::kStages) & 1);
  return ring.token[s] != 0;
}

template <class S, bool IM2COL>
__device__ void cluster_produce(const GemmParams& p, const CUtensorMap* map_a, const CUtensorMap* map_b,
                                const ClusterRing<S>& ring, int units, const int* flag, int entry, uint32_t rank) {
  tma_prefetch_map(map_a);
  tma_prefetch_map(map_b);
  const bool reads_flag = rank == 0 && flag != nullptr;
  StageHaltSchedule schedule{0, entry != 0};  // the entry read decides the first stage
  int it = 0;
  bool halted = false;
  for (int u = p.tile_begin + static_cast<int>(cluster_index()); u < units && !halted;
       u += static_cast<int>(cluster_count())) {
    const TileCoords c = cluster_tile_coords<S>(p, u, rank);
    const int a_row = c.m0 + static_cast<int>(rank / 2) * S::kAPartRows;  // this block's part of A
    const WindowCorner corner = IM2COL ? window_corner(p, a_row) : WindowCorner{};
    for (int kt = 0; kt < c.k_tiles; ++kt, ++it) {
      const int s = it % S::kStages;
      // The consumers of every block this producer writes into have released stage s.
      mbar_wait<true>(ring.empty(s), ((it / S::kStages) & 1) ^ 1);
      if (fill_halt_word(ring.halt, s, ring.full(s), stage_halts(ring, s, it, rank, schedule.halt_next))) {
        ++it;
        halted = true;
        break;
      }
      const uint32_t dst = ring.stages + s * S::kStageBytes;
      const int k0 = (c.kt_begin + kt) * kTmaBK;
      mbar_arrive_expect_tx(ring.full(s), S::kStageBytes);
      if constexpr (S::kCN == 1) {
        tma_load_a<IM2COL>(p, map_a, dst, k0, c.m0, corner, ring.full(s));
      } else {  // into both blocks of this row of the cluster: ranks rank % 2 and rank % 2 + 2
        tma_load_a<IM2COL>(p, map_a, dst + (rank / 2) * S::kAPartBytes, k0, a_row, corner, ring.full(s),
                           static_cast<uint16_t>(0x5u << (rank % 2)));
      }
      // Into both blocks of this column: ranks 2 (rank / 2) and 2 (rank / 2) + 1.
      tma_load_2d_multicast(dst + S::kABytes + (rank % 2) * S::kBHalfBytes, map_b, k0,
                            c.n0 + static_cast<int>(rank % 2) * S::kBHalfRows, ring.full(s),
                            static_cast<uint16_t>(0x3u << (2 * (rank / 2))));
      if (kt == 0) prefetch_tile_residual(p, c, S::kBN);
      if (reads_flag) schedule.after_fill(flag);
    }
  }
  // Every copy into this block's stages, the other producers' parts included, lands before the
  // block exits: the latest use of each stage.
  for (int j = max(0, it - S::kStages); j < it; ++j) {
    mbar_wait(ring.full(j % S::kStages), (j / S::kStages) & 1);
  }
}

template <class S>
__device__ void cluster_consume(const GemmParams& p, const ClusterRing<S>& ring, int units, bool preemptible,
                                uint32_t rank) {
  const int ctid = static_cast<int>(threadIdx.x) - 128;
  const int wg = ctid / 128;
  const bool leader = ctid % 128 == 0;  // releases stages for its warpgroup, in every writer's block
  const auto release = [&](int s) {
    mbar_arrive(ring.empty(s));
    mbar_arrive_cluster(ring.empty(s), rank ^ 1u);                             // the block sharing B
    if constexpr (S::kCN == 2) mbar_arrive_cluster(ring.empty(s), rank ^ 2u);  // the block sharing A
  };
  const auto chunk_barrier = [wg] {  // the epilogue's checks: none here, the producer decides
    warpgroup_barrier(wg);
    return false;
  };
  int it = 0;
  for (int u = p.tile_begin + static_cast<int>(cluster_index()); u < units; u += static_cast<int>(cluster_count())) {
    const TileCoords c = cluster_tile_coords<S>(p, u, rank);
    float acc[S::kBN / 2];
#pragma unroll
    for (int i = 0; i < S::kBN / 2; ++i) acc[i] = 0.0f;
    for (int kt = 0; kt < c.k_tiles; ++kt, ++it) {
      const int s = it % S::kStages;
      mbar_wait(ring.full(s), (it / S::kStages) & 1);
      if (preemptible && ring.halt[s] != 0) {
        wgmma_wait<0>();
        return;
      }
      tma_mma_k_tile<S::kBN>(acc, ring.stages + s * S::kStageBytes, S::kABytes, wg);
      // The previous K tile's MMAs have retired: its stage may be refilled.
      if (kt > 0 && leader) release((it - 1) % S::kStages);
    }
    wgmma_wait<0>();
    fence_registers(acc);
    if (c.k_tiles > 0 && leader) release((it - 1) % S::kStages);
    staged_epilogue<S::kBN>(p, epilogue_target(p, 0, c.split, c.n0), c.m0 + wg * 64, c.n0, acc,
                            ring.epilogue + wg * (kEpiBufBytes / 4), ctid % 128, wg, chunk_barrier);
  }
}

#endif  // ATL_WGMMA_DEVICE

template <int BN, int CN, bool IM2COL>
__global__ void __launch_bounds__(kTmaThreads, 1)
    cluster_gemm_kernel(const GemmParams p, const __grid_constant__ CUtensorMap map_a,
                        const __grid_constant__ CUtensorMap map_b, const int* flag) {
#if defined(ATL_WGMMA_DEVICE)
  using S = ClusterShape<BN, CN>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  // Both blocks compute the same offsets: a multicast copy lands at one offset in each.
  ClusterRing<S> ring;
  ring.stages = (raw + 1023u) & ~1023u;
  ring.epilogue = reinterpret_cast<float*>(smem_raw + (ring.stages + S::kStages * S::kStageBytes - raw));
  ring.bars = ring.stages + S::kStages * S::kStageBytes + 2 * kEpiBufBytes;
  const uint32_t words = ring.bars + 3 * 8 * S::kStages;
  ring.halt = reinterpret_cast<int*>(smem_raw + (words - raw));
  ring.token = ring.halt + S::kStages;
  ring.token_addr = words + 4 * S::kStages;
  const int tid = static_cast<int>(threadIdx.x);
  const uint32_t rank = cluster_rank();
  // The entry read, in flight while the barriers are set up.
  const int entry = (flag != nullptr && tid == 0 && rank == 0) ? load_flag(flag) : 0;
  if (tid == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(ring.full(s), 1);
      mbar_init(ring.empty(s), S::kEmptyArrivals);
      mbar_init(ring.token_bar(s), 1);
    }
    mbar_init_fence();
  }
  // The other blocks' barriers are initialized before any arrival or copy reaches them.
  cluster_sync();
  const int units =
      tile_range_end(p, ((p.M + kClusterRows - 1) / kClusterRows) * ((p.N + S::kTileN - 1) / S::kTileN) * p.splits);
  if (tid < 128) {
    warpgroup_reg_dealloc<kClusterProducerRegs>();
    if (tid == 0) cluster_produce<S, IM2COL>(p, &map_a, &map_b, ring, units, flag, entry, rank);
  } else {
    warpgroup_reg_alloc<kClusterConsumerRegs>();
    cluster_consume(p, ring, units, flag != nullptr, rank);
  }
  cluster_sync();
#else
  // Built without sm_90a: the planner never offers this tile (DeviceInfo::wgmma).
  __trap();
#endif
}

// One tile width's kernels on the host: their shared-memory limit, the clusters the device holds
// at once, and the launch (clusters of two blocks along x: a launch attribute rather than
// __cluster_dims__, which builds for architectures before sm_90 do not take).
template <int BN, int CN>
struct ClusterVariant {
  using S = ClusterShape<BN, CN>;

  static void prepare() {
    for (const auto kernel : {cluster_gemm_kernel<BN, CN, false>, cluster_gemm_kernel<BN, CN, true>}) {
      ATL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
    }
  }

  static cudaLaunchConfig_t config(unsigned clusters, cudaStream_t s, cudaLaunchAttribute& cluster) {
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = S::kBlocks;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t c{};
    c.gridDim = dim3(S::kBlocks * clusters);
    c.blockDim = dim3(kTmaThreads);
    c.dynamicSmemBytes = S::kSmemBytes;
    c.stream = s;
    c.attrs = &cluster;
    c.numAttrs = 1;
    return c;
  }

  // The persistent grid's limit: an SM whose GPC holds no partner for it runs no block.
  static int resident_clusters() {
    static const int clusters = [] {
      prepare();
      cudaLaunchAttribute cluster{};
      const cudaLaunchConfig_t c = config(1, nullptr, cluster);
      int n = 0;
      ATL_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, cluster_gemm_kernel<BN, CN, false>, &c));
      return n;
    }();
    return clusters;
  }

  static void launch(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name) {
    ATOLL_CHECK(tma_gemm_applies(p), kInternal,
                "kernel '{}': cluster tile given to a GEMM whose operands it cannot read", name);
    const bool plain = tma_reads_plain_a(p);
    const CUtensorMap map_a =
        plain ? matrix_map({p.a, p.M, p.K, p.in_c, S::kAPartRows}, name) : im2col_map(p, name, S::kAPartRows);
    const CUtensorMap map_b = matrix_map({p.b, p.N, p.K, p.ldb, S::kBHalfRows}, name);
    const int64_t units = gemm_launch_tiles(p, tile);
    int64_t clusters =
        std::min<int64_t>(tile_range_end(p, static_cast<int>(units)) - p.tile_begin, resident_clusters());
    // A slice's cap in blocks, in whole clusters: a cap below a cluster's blocks still runs one.
    if (p.max_blocks > 0) clusters = std::min<int64_t>(clusters, std::max(1, p.max_blocks / S::kBlocks));
    clusters = std::max<int64_t>(clusters, 1);
    const auto kernel = plain ? cluster_gemm_kernel<BN, CN, false> : cluster_gemm_kernel<BN, CN, true>;
    cudaLaunchAttribute cluster{};
    const cudaLaunchConfig_t c = config(static_cast<unsigned>(clusters), s, cluster);
    ATL_CUDA_CHECK(cudaLaunchKernelEx(&c, kernel, p, map_a, map_b, flag));
    ATL_CUDA_CHECK_LAUNCH(name);
  }
};

template <typename Fn>
void dispatch_cluster(GemmTile tile, Fn&& fn) {
  switch (tile) {
    case GemmTile::kC256x256:
      return fn(ClusterVariant<256, 1>{});
    case GemmTile::kC256x128:
      return fn(ClusterVariant<128, 1>{});
    case GemmTile::kC256x512:
      return fn(ClusterVariant<256, 2>{});
    default:
      ATOLL_THROW(kInternal, "not a cluster tile");
  }
}

}  // namespace

bool cluster_gemm_supported() {
  return wgmma_gemm_built() && ClusterVariant<256, 1>::resident_clusters() > 0 &&
         ClusterVariant<128, 1>::resident_clusters() > 0 && ClusterVariant<256, 2>::resident_clusters() > 0;
}

void prepare_cluster_gemm(GemmTile tile) {
  dispatch_cluster(tile, [](auto v) { decltype(v)::prepare(); });
}

void launch_cluster_gemm(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name) {
  dispatch_cluster(tile, [&](auto v) { decltype(v)::launch(p, tile, s, flag, name); });
}

}  // namespace atl::cuda
