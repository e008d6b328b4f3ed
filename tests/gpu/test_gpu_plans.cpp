// The CUDA backend's launch planning, which needs no GPU: the fused attention's query tiles
// against each device's shared memory and grid, and which GEMMs the TMA tiles and the GEMV may take.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/kernel_params.h"

namespace atl {
namespace {

// The fused attention's query tile follows the device's shared memory per block (H200, A100,
// L4): the chosen tile always fits, a wider one would not or would be half empty, and the widest
// heads fit everywhere, so the key limit is the same on every device. Needs no GPU.
TEST(GpuAttentionPlan, TilesFitTheDeviceSharedMemory) {
  const size_t h200 = 232448, a100 = 166912, l4 = 101376;
  EXPECT_EQ(cuda::attention_tile_rows(128, 64, 64, h200), 64) << "BERT-base: 64 queries per block";
  EXPECT_EQ(cuda::attention_tile_rows(10, 64, 64, h200), 16) << "10 queries take one 16-row tile";
  EXPECT_EQ(cuda::attention_tile_rows(33, 64, 64, h200), 64) << "33 queries fill more than half of 64 rows";
  for (const size_t smem : {h200, a100, l4}) {
    for (int queries : {1, 17, 33, 128, 500}) {
      for (int d : {8, 64, 100, 128}) {
        const int rows = cuda::attention_tile_rows(queries, d, d, smem);
        ASSERT_GT(rows, 0) << queries << " " << d;
        EXPECT_LE(cuda::attention_smem_bytes(rows, d, d), smem);
        if (rows < 64 && queries > rows) {
          EXPECT_GT(cuda::attention_smem_bytes(rows * 2, d, d) + 128, smem) << "a wider tile fit";
        }
      }
    }
  }
  EXPECT_LT(cuda::attention_smem_bytes(64, 64, 64), cuda::attention_smem_bytes(64, 128, 128)) << "wide heads pay";
  EXPECT_EQ(cuda::attention_smem_bytes(16, 8, 64), cuda::attention_smem_bytes(16, 64, 8)) << "one width for both";
}

// A grid of fewer than two blocks per SM takes narrower query tiles, never below 16 rows and never
// wider than the tile that fits (BERT-base, 12 heads of 128 queries, on 132 SMs). Needs no GPU.
TEST(GpuAttentionPlan, SmallGridsTakeNarrowerTiles) {
  EXPECT_EQ(cuda::attention_grid_rows(64, 12, 128, 132), 16) << "batch 1: 96 blocks of 16 rows";
  EXPECT_EQ(cuda::attention_grid_rows(64, 96, 128, 132), 32) << "batch 8: 384 blocks of 32 rows";
  EXPECT_EQ(cuda::attention_grid_rows(64, 384, 128, 132), 64) << "batch 32 fills the GPU with 64 rows";
  EXPECT_EQ(cuda::attention_grid_rows(32, 384, 128, 132), 32) << "never wider than what fits";
  EXPECT_EQ(cuda::attention_grid_rows(16, 1, 16, 132), 16);
  for (int matrices : {1, 7, 96, 1000}) {
    for (int queries : {1, 50, 128, 512}) {
      const int rows = cuda::attention_grid_rows(64, matrices, queries, 132);
      EXPECT_TRUE(rows == 16 || rows == 32 || rows == 64);
      if (rows > 16) {
        EXPECT_GE(matrices * ((queries + rows - 1) / rows), 2 * 132) << matrices << " " << queries;
      }
    }
  }
}

// The TMA tiles read A through a tensor map: a plain row-major [M, K], or a convolution's im2col
// in K tiles of 64 channels of one tap. Never for fewer or odd channel counts, groups, unaligned
// rows, or windows a rank-4 im2col map cannot encode. Needs no GPU.
TEST(GpuGemmPlan, TmaTilesOnlyForOperandsAMapReads) {
  const auto* aligned = reinterpret_cast<const __half*>(uintptr_t{0x10000});
  cuda::GemmParams g;
  g.a = g.b = aligned;
  g.M = 1024;
  g.N = 3072;
  g.K = 768;
  g.in_w = g.out_w = g.M;
  g.in_c = g.cg = g.K;
  g.ldb = g.K;
  EXPECT_TRUE(cuda::tma_gemm_applies(g));
  // VGG-19's conv3_1 at batch 2: 56 x 56, 128 -> 256 channels, 3x3, pad 1.
  cuda::GemmParams conv3x3 = g;
  conv3x3.in_h = conv3x3.in_w = conv3x3.out_h = conv3x3.out_w = 56;
  conv3x3.M = 2 * 56 * 56;
  conv3x3.in_c = conv3x3.cg = 128;
  conv3x3.K = 9 * 128;
  conv3x3.kw = 3;
  conv3x3.pad_t = conv3x3.pad_l = 1;
  conv3x3.N = 256;
  conv3x3.ldb = conv3x3.K;
  EXPECT_TRUE(cuda::tma_gemm_applies(conv3x3));
  cuda::GemmParams strided = conv3x3;  // a stride-2 3x3 of ResNet's downsampling blocks
  strided.stride_h = strided.stride_w = 2;
  strided.out_h = strided.out_w = 28;
  strided.M = 2 * 28 * 28;
  EXPECT_TRUE(cuda::tma_gemm_applies(strided));
  cuda::GemmParams narrow = conv3x3;  // K tiles of 64 would straddle taps
  narrow.in_c = narrow.cg = 96;
  narrow.K = 9 * 96;
  narrow.ldb = narrow.K;
  EXPECT_FALSE(cuda::tma_gemm_applies(narrow));
  cuda::GemmParams wide_pad = conv3x3;  // a window corner below the map's -128
  wide_pad.pad_t = wide_pad.pad_l = 130;
  EXPECT_FALSE(cuda::tma_gemm_applies(wide_pad));
  cuda::GemmParams ragged = conv3x3;  // M not a whole number of images
  ragged.M += 5;
  EXPECT_FALSE(cuda::tma_gemm_applies(ragged));
  cuda::GemmParams batched = g;
  batched.batch = 2;
  EXPECT_FALSE(cuda::tma_gemm_applies(batched));
  cuda::GemmParams odd_rows = g;
  odd_rows.in_c = 772;  // rows 1544 bytes apart: not a multiple of 16
  EXPECT_FALSE(cuda::tma_gemm_applies(odd_rows));
  cuda::GemmParams unaligned = g;
  unaligned.a = reinterpret_cast<const __half*>(uintptr_t{0x10008});
  EXPECT_FALSE(cuda::tma_gemm_applies(unaligned));

  const auto has_tma_tile = [](const cuda::GemmShape& s) {
    for (const cuda::GemmChoice& c : cuda::candidate_choices(s)) {
      if (cuda::gemm_tile_is_tma(c.tile)) return true;
    }
    return false;
  };
  cuda::GemmShape shape{g.M, g.N, g.K, 1, true, false, true, true};
  EXPECT_TRUE(has_tma_tile(shape));
  shape.tma = false;
  EXPECT_FALSE(has_tma_tile(shape));
  shape.tma = true;
  // A grouped Gemm's tiles lie inside one segment: segments of 192 columns keep only the 64-wide
  // TMA tile, of 256 every TMA tile.
  shape.n_segment = 192;
  EXPECT_TRUE(has_tma_tile(shape));
  for (const cuda::GemmChoice& c : cuda::candidate_choices(shape)) {
    EXPECT_EQ(192 % cuda::gemm_tile_n(c.tile), 0) << "tile " << static_cast<int>(c.tile);
    if (cuda::gemm_tile_is_tma(c.tile)) {
      EXPECT_TRUE(c.tile == cuda::GemmTile::kT128x64 || c.tile == cuda::GemmTile::kD128x64);
    }
  }
  shape.n_segment = 256;
  const auto unsplit_tma_tiles = [&shape] {
    int n = 0;
    for (const cuda::GemmChoice& c : cuda::candidate_choices(shape)) n += cuda::gemm_tile_is_tma(c.tile) && c.splits == 1;
    return n;
  };
  EXPECT_EQ(unsplit_tma_tiles(), 3) << "the ping-pong, two-block and cluster tiles are offered only when asked for";
  shape.pingpong = true;
  EXPECT_EQ(unsplit_tma_tiles(), 4);
  shape.dual_tile = true;
  EXPECT_EQ(unsplit_tma_tiles(), 5);
  shape.cluster_tile = true;
  EXPECT_EQ(unsplit_tma_tiles(), 7) << "c256x256 and c256x128; c256x512 spans two segments of 256";
  shape.n_segment = 512;
  EXPECT_EQ(unsplit_tma_tiles(), 8);
  // Segments of 192 columns hold no tile of 128 columns or more, the clusters' included.
  shape.n_segment = 192;
  for (const cuda::GemmChoice& c : cuda::candidate_choices(shape)) EXPECT_FALSE(cuda::gemm_tile_is_cluster(c.tile));
  shape.pingpong = false;
  shape.dual_tile = false;
  shape.cluster_tile = false;
  shape.n_segment = 0;
  shape.wgmma = false;  // a device without wgmma
  EXPECT_FALSE(has_tma_tile(shape));
}

// The GEMV path serves batch-1 GEMMs of up to kGemvMaxRows rows over a plain row-major A with
// 16-byte rows, never in place, and the planner offers it (once, unsplit) only where it applies.
TEST(GpuGemmPlan, GemvOnlyForFewRowsOfAPlainA) {
  const auto* aligned = reinterpret_cast<const __half*>(uintptr_t{0x10000});
  cuda::GemmParams g;  // VGG-19's first classifier Gemm at batch 1
  g.a = g.b = aligned;
  g.M = 1;
  g.N = 4096;
  g.K = 25088;
  g.in_c = g.cg = g.ldb = g.K;
  EXPECT_TRUE(cuda::gemv_applies(g));
  cuda::GemmParams rows = g;
  rows.M = cuda::kGemvMaxRows;
  EXPECT_TRUE(cuda::gemv_applies(rows));
  ++rows.M;
  EXPECT_FALSE(cuda::gemv_applies(rows));
  cuda::GemmParams batched = g;
  batched.batch = 2;
  EXPECT_FALSE(cuda::gemv_applies(batched));
  cuda::GemmParams conv = g;  // a 3x3 convolution's im2col walk
  conv.kw = 3;
  conv.cg = g.K / 9;
  EXPECT_FALSE(cuda::gemv_applies(conv));
  cuda::GemmParams ragged = g;
  ragged.K = ragged.in_c = ragged.cg = ragged.ldb = 37;
  EXPECT_FALSE(cuda::gemv_applies(ragged));
  cuda::GemmParams unaligned = g;
  unaligned.b = reinterpret_cast<const __half*>(uintptr_t{0x10008});
  EXPECT_FALSE(cuda::gemv_applies(unaligned));
  cuda::GemmParams in_place = g;
  auto* out = reinterpret_cast<__half*>(uintptr_t{0x20000});
  in_place.c = out;
  in_place.residual = out;
  EXPECT_FALSE(cuda::gemv_applies(in_place));
  in_place.residual = aligned;
  EXPECT_TRUE(cuda::gemv_applies(in_place));

  cuda::GemmShape shape{g.M, g.N, g.K, 1, true, false, true, true};
  const auto gemv_choices = [](const cuda::GemmShape& s) {
    int n = 0;
    for (const cuda::GemmChoice& c : cuda::candidate_choices(s)) {
      if (c.tile == cuda::GemmTile::kGemv) {
        EXPECT_EQ(c.splits, 1);
        ++n;
      }
    }
    return n;
  };
  EXPECT_EQ(gemv_choices(shape), 0);
  shape.gemv = true;
  EXPECT_EQ(gemv_choices(shape), 1);
  EXPECT_FALSE(cuda::gemm_tile_is_wgmma(cuda::GemmTile::kGemv));
  EXPECT_FALSE(cuda::gemm_tile_is_tma(cuda::GemmTile::kGemv));
  // One pass over B with no partials: the cost model puts it ahead of every tile without split-K
  // (whether ahead of the split-K tiles, autotuning decides on a GPU).
  const cuda::GemmChoice gemv{cuda::GemmTile::kGemv, 1};
  for (const cuda::GemmChoice& c : cuda::candidate_choices(shape)) {
    if (c.tile != cuda::GemmTile::kGemv && c.splits == 1) {
      EXPECT_LT(cuda::estimate_gemm_us(shape, gemv, 132), cuda::estimate_gemm_us(shape, c, 132));
    }
  }
  // Every row adds its reads of A's staged chunks, so more rows never cost less.
  cuda::GemmShape eight = shape;
  eight.M = cuda::kGemvMaxRows;
  EXPECT_GT(cuda::estimate_gemm_us(eight, gemv, 132), cuda::estimate_gemm_us(shape, gemv, 132));
}

}  // namespace
}  // namespace atl
