#include "backends/cuda/gemm_plan.h"

#include <algorithm>
#include <cmath>

namespace atl::cuda {

namespace {

// Model constants, fitted to every alternative of 1,440 GEMM kernels timed on an H200
// (docs/PERFORMANCE.md, run 3): an SM sustains ~1.5 TFLOP/s through this kernel's mma.sync loop;
// a K tile costs at least ~0.3 us of latency however little work it holds; a block has ~4 us of
// fixed cost; the split-K reduction adds ~1 us and a pass over the f32 partials. With them the
// model's picks cost 11% more than the fastest alternatives in total (19% on models left out of
// the fit); autotuning at load, the default, closes that gap.
constexpr double kSmFlopsPerUs = 1.5e6;
constexpr double kKTileLatencyUs = 0.3;
constexpr double kBlockOverheadUs = 4.0;
constexpr double kReduceLaunchUs = 1.0;
constexpr double kBytesPerUs = 3.0e6;
constexpr int kMaxSplits = 32;
// The GEMV path streams B at close to HBM bandwidth after a launch's fixed cost, plus its reads
// of A's staged rows from shared memory (every row once per pair of columns) at the device's
// shared-memory bandwidth. Guesses: the first version, which read A per warp from L2, streamed
// 205 MB at 2.4 TB/s on the H100 (session 29); autotuning at load times it against the tiles.
constexpr double kGemvBytesPerUs = 3.0e6;
constexpr double kGemvSmemBytesPerUs = 25.0e6;
constexpr double kGemvOverheadUs = 2.0;
constexpr int kMinKTilesPerSplit = 4;

struct TileTraits {
  GemmTile tile;
  int blocks_per_sm;   // resident blocks (shared memory and registers allow)
  double efficiency;   // MMA throughput relative to the largest tile, per SM
  int sms = 1;         // SMs one tile runs on (a cluster's blocks)
};

constexpr TileTraits kTiles[] = {
    {GemmTile::k128x128, 2, 1.0},
    {GemmTile::k128x64, 3, 0.9},
    {GemmTile::k64x64, 4, 1.0},
    {GemmTile::k32x64, 6, 0.8},
};
// Guesses before the first H200 run (wgmma's dense peak is ~4x what the mma.sync loop sustains);
// autotuning at load measures them.
constexpr TileTraits kWgmmaTiles[] = {
    {GemmTile::kW128x128, 1, 3.0},
    {GemmTile::kW128x64, 2, 2.5},
    {GemmTile::kW64x128, 2, 2.5},
    {GemmTile::kW64x64, 3, 2.0},
};
// Guesses before their first H200 run, as above.
constexpr TileTraits kTmaTiles[] = {
    {GemmTile::kT128x128, 1, 4.0},
    {GemmTile::kT128x256, 1, 5.0},
    {GemmTile::kT128x64, 1, 3.5},   // guesses as well (session 20); autotuning times them
    {GemmTile::kP128x128, 1, 4.5},
    {GemmTile::kD128x64, 2, 3.5},
    {GemmTile::kC256x256, 1, 5.5, 2},  // session 38's guesses, before any run
    {GemmTile::kC256x128, 1, 4.5, 2},
    {GemmTile::kC256x512, 1, 6.0, 4},
};

const TileTraits& traits(GemmTile t) {
  for (const TileTraits& tt : kTiles) {
    if (tt.tile == t) return tt;
  }
  for (const TileTraits& tt : kWgmmaTiles) {
    if (tt.tile == t) return tt;
  }
  for (const TileTraits& tt : kTmaTiles) {
    if (tt.tile == t) return tt;
  }
  return kTiles[2];
}

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

}  // namespace

std::vector<GemmChoice> candidate_choices(const GemmShape& s) {
  std::vector<GemmTile> tiles;
  if (s.vec && !s.b_kn) {
    for (const TileTraits& t : kTiles) tiles.push_back(t.tile);
    if (s.wgmma) {
      for (const TileTraits& t : kWgmmaTiles) tiles.push_back(t.tile);
    }
    if (s.wgmma && s.tma) {
      for (const TileTraits& t : kTmaTiles) {
        if (gemm_tile_is_pingpong(t.tile) && !s.pingpong) continue;
        if (gemm_tile_is_dual(t.tile) && !s.dual_tile) continue;
        if (gemm_tile_is_cluster(t.tile) && !s.cluster_tile) continue;
        tiles.push_back(t.tile);
      }
    }
  } else {
    tiles.push_back(GemmTile::k64x64);  // the only instantiation of the scalar and [K, N] variants
  }
  std::vector<GemmChoice> out;
  if (s.gemv) out.push_back({GemmTile::kGemv, 1});
  for (GemmTile t : tiles) {
    if (s.n_segment > 0 && s.n_segment % gemm_tile_n(t) != 0) continue;
    const int k_tiles = ceil_div(s.K, gemm_tile_k(t));
    int last = 0;
    for (int splits = 1; splits <= kMaxSplits; splits *= 2) {
      if (splits > 1 && k_tiles / splits < kMinKTilesPerSplit) break;
      // Splits that leave the same number of tiles per split are the same schedule.
      const int effective = ceil_div(k_tiles, ceil_div(k_tiles, splits));
      if (effective == last) continue;
      last = effective;
      out.push_back({t, effective});
    }
  }
  return out;
}

double estimate_gemm_us(const GemmShape& s, const GemmChoice& c, int sm_count) {
  if (c.tile == GemmTile::kGemv) {
    const double bytes = 2.0 * (static_cast<double>(s.N) * s.K + static_cast<double>(s.M) * (s.K + s.N));
    const double staged = static_cast<double>(s.M) * s.N * s.K;  // A's 2-byte halves, once per two columns
    return kGemvOverheadUs + bytes / kGemvBytesPerUs + staged / kGemvSmemBytesPerUs;
  }
  const TileTraits& t = traits(c.tile);
  const int bm = gemm_tile_m(c.tile), bn = gemm_tile_n(c.tile);
  const int tile_k = gemm_tile_k(c.tile);
  const int k_tiles = ceil_div(s.K, tile_k);
  const int tiles_per_split = ceil_div(k_tiles, c.splits);
  const int64_t blocks = static_cast<int64_t>(ceil_div(s.M, bm)) * ceil_div(s.N, bn) * s.batch * c.splits;
  const int per_sm = ceil_div(blocks, std::max(1, sm_count / t.sms));
  const int concurrent = std::min(per_sm, t.blocks_per_sm);
  const int rounds = ceil_div(per_sm, t.blocks_per_sm);
  const double tile_flops = 2.0 * bm * bn * tile_k;
  const double per_tile_us =
      std::max(kKTileLatencyUs, concurrent * tile_flops / (kSmFlopsPerUs * t.efficiency * t.sms));
  double us = kBlockOverheadUs + rounds * tiles_per_split * per_tile_us;
  // Memory floor: operands read once, output written once.
  const double bytes = 2.0 * s.batch * (static_cast<double>(s.M) * s.K + static_cast<double>(s.N) * s.K +
                                        static_cast<double>(s.M) * s.N);
  us = std::max(us, bytes / kBytesPerUs);
  if (c.splits > 1) {
    us += kReduceLaunchUs + static_cast<double>(split_workspace_bytes(s, c)) * 2.0 / kBytesPerUs;
  }
  return us;
}

GemmChoice choose_gemm(const GemmShape& s, int sm_count) {
  GemmChoice best;
  double best_us = 0;
  for (const GemmChoice& c : candidate_choices(s)) {
    const double us = estimate_gemm_us(s, c, sm_count);
    if (best_us == 0 || us < best_us) {
      best = c;
      best_us = us;
    }
  }
  return best;
}

size_t split_workspace_bytes(const GemmShape& s, const GemmChoice& c) {
  if (c.splits <= 1) return 0;
  return static_cast<size_t>(c.splits) * static_cast<size_t>(s.batch) * static_cast<size_t>(s.M) *
         static_cast<size_t>(s.N) * sizeof(float);
}

}  // namespace atl::cuda
