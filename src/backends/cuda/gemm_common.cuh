#pragma once
// Device pieces both tensor-core GEMM kernels share: async copies, the implicit im2col address
// arithmetic, and the fused epilogue (bias, residual, activation, or split-K partials).
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device_common.cuh"

namespace atl::cuda::gemm {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes = 0 writes zeros (padding and out-of-range rows).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ldmatrix of four 8x8 f16 matrices (plain and transposed) and the m16n8k16 tensor-core MMA with
// f32 accumulators: the mma.sync GEMM and the fused attention share them.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Where one A row (output pixel) reads its input: image base and the top-left tap position.
struct RowOrigin {
  const __half* base;
  int ih0, iw0;  // ih0 = INT_MIN/2 marks a row past M: every tap then falls outside the image
};

__device__ __forceinline__ RowOrigin row_origin(const GemmParams& p, const __half* a, int m) {
  RowOrigin o;
  if (m >= p.M) {
    o.base = a;
    o.ih0 = -(1 << 29);
    o.iw0 = 0;
    return o;
  }
  const int per_img = p.out_h * p.out_w;
  const int img = m / per_img;
  const int rem = m - img * per_img;
  const int oh = rem / p.out_w;
  const int ow = rem - oh * p.out_w;
  o.base = a + static_cast<int64_t>(img) * p.in_h * p.in_w * p.in_c;
  o.ih0 = oh * p.stride_h - p.pad_t;
  o.iw0 = ow * p.stride_w - p.pad_l;
  return o;
}

// Column k of A -> (tap row offset, tap column offset, channel).
struct ColTap {
  int dh, dw, c;
  bool valid;
};

__device__ __forceinline__ ColTap col_tap(const GemmParams& p, int k) {
  ColTap t;
  t.valid = k < p.K;
  const int rs = k / p.cg;
  t.c = k - rs * p.cg;
  const int r = rs / p.kw;
  t.dh = r * p.dil_h;
  t.dw = (rs - r * p.kw) * p.dil_w;
  return t;
}

__device__ __forceinline__ const __half* tap_address(const GemmParams& p, const RowOrigin& o, const ColTap& t,
                                                     bool& valid) {
  const int ih = o.ih0 + t.dh;
  const int iw = o.iw0 + t.dw;
  valid = t.valid && ih >= 0 && ih < p.in_h && iw >= 0 && iw < p.in_w;
  return valid ? o.base + (static_cast<int64_t>(ih) * p.in_w + iw) * p.in_c + t.c : o.base;
}

// Where matrix `bidx` of an operand starts (GemmParams::batch_inner).
__device__ __forceinline__ int64_t batch_offset(const GemmParams& p, int bidx, int64_t stride, int64_t outer) {
  if (p.batch_inner <= 0) return bidx * stride;
  const int i0 = bidx / p.batch_inner;
  return i0 * outer + (bidx - i0 * p.batch_inner) * stride;
}

// Where one (batch, split) tile's results go, resolved once per tile.
struct EpilogueTarget {
  float* part;  // split-K partials, or nullptr: finish the epilogue here
  __half* c;
  const __half* residual;
  const float* bias;
  bool pairs_c, pairs_part;  // column pairs may go out as one 4-byte store
};

// The tile's first column n0 picks its segment of a grouped Gemm's output: the base moves to the
// segment and back by its first column, so stores keep addressing row * ldc + col.
__device__ __forceinline__ EpilogueTarget epilogue_target(const GemmParams& p, int bidx, int split, int n0) {
  EpilogueTarget t;
  t.part = p.splits > 1 ? p.partial + (static_cast<int64_t>(split) * p.batch + bidx) * p.M * p.N : nullptr;
  int64_t c_off = batch_offset(p, bidx, p.c_batch_stride, p.c_outer_stride);
  if (p.n_segment > 0) {
    const int s = n0 / p.n_segment;
    c_off += s * (p.c_segment_stride - p.n_segment);
  }
  t.c = p.c + c_off;
  t.residual = p.residual ? p.residual + c_off : nullptr;
  t.bias = p.bias ? p.bias + bidx * p.bias_batch_stride : nullptr;
  t.pairs_c = (p.ldc % 2 == 0) && (c_off % 2 == 0);
  t.pairs_part = p.N % 2 == 0;
  return t;
}

// Where output (row, col) of matrix bidx lies from its base (GemmParams::n_segment), for kernels
// that walk elements rather than tiles.
__device__ __forceinline__ int64_t c_index(const GemmParams& p, int row, int col) {
  if (p.n_segment > 0) {
    const int s = col / p.n_segment;
    return s * p.c_segment_stride + static_cast<int64_t>(row) * p.ldc + (col - s * p.n_segment);
  }
  return static_cast<int64_t>(row) * p.ldc + col;
}

// Split-K partials of accumulators (row, col) and (row, col + 1); either may fall outside.
__device__ __forceinline__ void store_partial_pair(const GemmParams& p, const EpilogueTarget& t, int row, int col,
                                                   float v0, float v1) {
  if (row >= p.M || col >= p.N) return;
  float* dst = t.part + static_cast<int64_t>(row) * p.N + col;
  if (col + 1 < p.N && t.pairs_part) {
    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
  } else {
    dst[0] = v0;
    if (col + 1 < p.N) dst[1] = v1;
  }
}

// Pulls a tile's residual rows (`rows` x `cols` from (m0, n0)) toward L2 while its K loop runs,
// so the epilogue's loads of them wait on L2 rather than DRAM: ResNet's 1x1 convolutions run a
// K loop of one or two tiles, and their epilogues waited on the residual's DRAM round trips.
// Thread `first` of `step` issues every step-th 128-byte line.
__device__ __forceinline__ void prefetch_residual(const GemmParams& p, const EpilogueTarget& t, int m0, int n0,
                                                  int rows, int cols, int first, int step) {
  if (t.residual == nullptr || t.part != nullptr || n0 >= p.N) return;
  const int n = min(cols, p.N - n0);
  const int lines = (n * 2 + 127) / 128 + 1;  // a row may straddle one more line
  for (int i = first; i < rows * lines; i += step) {
    const int r = i / lines;
    if (m0 + r >= p.M) return;  // rows ascend with i
    const __half* row = t.residual + static_cast<int64_t>(m0 + r) * p.ldc + n0;
    const uintptr_t line = (reinterpret_cast<uintptr_t>(row) & ~uintptr_t{127}) + uintptr_t{128} * (i - r * lines);
    if (line < reinterpret_cast<uintptr_t>(row + n)) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(line));
  }
}

// What a finished output pair adds to alpha * acc: its bias and its residual, loaded apart from
// the stores so that a group's loads are all in flight at once (a store may alias them, so the
// compiler keeps a load behind every earlier store: one round trip per pair, serialized).
struct PairAddend {
  float2 bias;
  __half2 residual;
};

__device__ __forceinline__ PairAddend pair_addend(const GemmParams& p, const EpilogueTarget& t, int row, int col) {
  PairAddend a{make_float2(0.0f, 0.0f), __floats2half2_rn(0.0f, 0.0f)};
  if (row >= p.M || col >= p.N) return a;
  const bool both = col + 1 < p.N;
  if (t.bias) {
    a.bias.x = t.bias[col];
    if (both) a.bias.y = t.bias[col + 1];
  }
  if (t.residual) {
    const int64_t off = static_cast<int64_t>(row) * p.ldc + col;
    if (both && t.pairs_c) {
      a.residual = *reinterpret_cast<const __half2*>(t.residual + off);
    } else {
      a.residual.x = t.residual[off];
      if (both) a.residual.y = t.residual[off + 1];
    }
  }
  return a;
}

// The finished outputs (row, col) and (row, col + 1): scale, bias, residual, activation ACT.
template <int ACT>
__device__ __forceinline__ void store_final_pair(const GemmParams& p, const EpilogueTarget& t, int row, int col,
                                                 float v0, float v1, const PairAddend& a) {
  if (row >= p.M || col >= p.N) return;
  const bool both = col + 1 < p.N;
  const bool vec = both && t.pairs_c;
  const int64_t off = static_cast<int64_t>(row) * p.ldc + col;
  float r0 = p.alpha * v0 + a.bias.x, r1 = p.alpha * v1 + a.bias.y;
  if (t.residual) {
    const float2 rr = __half22float2(a.residual);
    r0 += rr.x;
    r1 += rr.y;
  }
  r0 = apply_act(r0, ACT);
  r1 = apply_act(r1, ACT);
  if (vec) {
    *reinterpret_cast<__half2*>(t.c + off) = __floats2half2_rn(r0, r1);
  } else {
    t.c[off] = __float2half(r0);
    if (both) t.c[off + 1] = __float2half(r1);
  }
}

// Pairs whose addends are loaded together, before the group's stores.
constexpr int kPairGroup = 8;

template <int Pairs, int ACT, typename PairFn>
__device__ __forceinline__ void finish_pairs(const GemmParams& p, const EpilogueTarget& t, PairFn&& pair) {
  // fn(i, row, col, v0, v1) for pair g + i of the group starting at g.
  const auto each_in_group = [&](int g, auto&& fn) {
#pragma unroll
    for (int i = 0; i < kPairGroup; ++i) {
      if (g + i >= Pairs) break;
      int row, col;
      float v0, v1;
      pair(g + i, row, col, v0, v1);
      fn(i, row, col, v0, v1);
    }
  };
#pragma unroll
  for (int g = 0; g < Pairs; g += kPairGroup) {
    PairAddend add[kPairGroup];
    each_in_group(g, [&](int i, int row, int col, float, float) { add[i] = pair_addend(p, t, row, col); });
    each_in_group(g, [&](int i, int row, int col, float v0, float v1) {
      store_final_pair<ACT>(p, t, row, col, v0, v1, add[i]);
    });
  }
}

// The fused epilogue over a thread's `Pairs` accumulator pairs; pair(i, row, col, v0, v1) names
// pair i (i is a constant after unrolling, so accumulators stay in registers). The activation
// is a template argument with one unrolled loop per kind: a runtime switch inside the unrolled
// loop put erff and tanhf inline at every accumulator, 200-370 KB of code per GEMM kernel that
// missed the instruction cache on every tile (ncu: "no instruction" 60-67% of the stalls).
template <int Pairs, typename PairFn>
__device__ __forceinline__ void store_pairs(const GemmParams& p, const EpilogueTarget& t, PairFn&& pair) {
  if (t.part != nullptr) {
#pragma unroll
    for (int i = 0; i < Pairs; ++i) {
      int row, col;
      float v0, v1;
      pair(i, row, col, v0, v1);
      store_partial_pair(p, t, row, col, v0, v1);
    }
    return;
  }
  switch (p.act) {
    case kActRelu:
      return finish_pairs<Pairs, kActRelu>(p, t, pair);
    case kActRelu6:
      return finish_pairs<Pairs, kActRelu6>(p, t, pair);
    case kActGelu:
      return finish_pairs<Pairs, kActGelu>(p, t, pair);
    case kActTanh:
      return finish_pairs<Pairs, kActTanh>(p, t, pair);
    default:
      return finish_pairs<Pairs, kActNone>(p, t, pair);
  }
}

// What four consecutive finished outputs (row, col .. col + 3) add to alpha * acc, loaded before
// the staged epilogue's stores for the reason PairAddend gives; zeros where absent or outside.
struct QuadAddend {
  float4 bias;
  uint2 residual;  // four halves
};

// The bias of four consecutive output columns (zeros past N, for split-K partials, or with no
// bias): one load serves every row a thread finishes in that column group.
__device__ __forceinline__ float4 quad_bias(const GemmParams& p, const EpilogueTarget& t, int col) {
  float b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (t.part == nullptr && t.bias != nullptr && col < p.N) {
    const int valid = min(4, p.N - col);
    for (int e = 0; e < valid; ++e) b[e] = t.bias[col + e];
  }
  return make_float4(b[0], b[1], b[2], b[3]);
}

// The residual of four consecutive outputs as four halves (zeros outside the matrix, for split-K
// partials, or with no residual).
__device__ __forceinline__ uint2 quad_residual(const GemmParams& p, const EpilogueTarget& t, int row, int col) {
  if (t.part != nullptr || t.residual == nullptr || row >= p.M || col >= p.N) return make_uint2(0, 0);
  const int valid = min(4, p.N - col);
  const __half* src = t.residual + static_cast<int64_t>(row) * p.ldc + col;
  if (valid == 4 && reinterpret_cast<uintptr_t>(src) % 8 == 0) return *reinterpret_cast<const uint2*>(src);
  __half h[4] = {__float2half(0.0f), __float2half(0.0f), __float2half(0.0f), __float2half(0.0f)};
  for (int e = 0; e < valid; ++e) h[e] = src[e];
  return *reinterpret_cast<const uint2*>(h);
}

// Four consecutive outputs (row, col .. col + 3) of the fused epilogue, for epilogues that stage
// accumulators through shared memory and finish them row-contiguous: split-K partials as one
// 16-byte store, finished outputs as one 8-byte store where aligned (tails element by element).
__device__ __forceinline__ void finish_quad(const GemmParams& p, const EpilogueTarget& t, int row, int col, float4 v,
                                            const QuadAddend& a) {
  if (row >= p.M || col >= p.N) return;
  const int valid = min(4, p.N - col);
  float r[4] = {v.x, v.y, v.z, v.w};
  if (t.part != nullptr) {
    float* dst = t.part + static_cast<int64_t>(row) * p.N + col;
    if (valid == 4 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
      *reinterpret_cast<float4*>(dst) = v;
    } else {
      for (int e = 0; e < valid; ++e) dst[e] = r[e];
    }
    return;
  }
  const int64_t off = static_cast<int64_t>(row) * p.ldc + col;
  const bool vec = valid == 4 && reinterpret_cast<uintptr_t>(t.c + off) % 8 == 0;
  const float bias[4] = {a.bias.x, a.bias.y, a.bias.z, a.bias.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) r[e] = p.alpha * r[e] + bias[e];
  if (t.residual != nullptr) {
    const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&a.residual.x));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&a.residual.y));
    r[0] += lo.x;
    r[1] += lo.y;
    r[2] += hi.x;
    r[3] += hi.y;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) r[e] = apply_act(r[e], p.act);
  if (vec) {
    const __half2 lo = __floats2half2_rn(r[0], r[1]), hi = __floats2half2_rn(r[2], r[3]);
    uint2 raw;
    raw.x = *reinterpret_cast<const uint32_t*>(&lo);
    raw.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(t.c + off) = raw;
  } else {
    for (int e = 0; e < valid; ++e) t.c[off + e] = __float2half(r[e]);
  }
}

// The grid contract of both GEMM kernels. Grids up to this many waves of resident blocks launch
// one block per tile: after a raise, the queued blocks each stop at their first check (a few
// microseconds for the whole queue), and the plain kernel keeps fewer registers. Larger grids run
// persistent: resident blocks walk the tiles in the order an uncapped grid would launch them, so a
// raised flag stops every block within a check, with no queue of unlaunched blocks left.
constexpr int64_t kPersistentAfterWaves = 4;

// The end of the tiles a launch walks: all `tiles`, or a padding slice's (GemmParams::tile_end).
__host__ __device__ __forceinline__ int tile_range_end(const GemmParams& p, int tiles) {
  return p.tile_end > 0 ? p.tile_end : tiles;
}

// The grid of a persistent walk over the launch's tiles: at most `resident` blocks, and at most a
// slice's max_blocks.
inline unsigned persistent_grid(const GemmParams& p, int64_t tiles, int64_t resident) {
  int64_t grid = std::min<int64_t>(tile_range_end(p, static_cast<int>(tiles)) - p.tile_begin, resident);
  if (p.max_blocks > 0) grid = std::min<int64_t>(grid, p.max_blocks);
  return static_cast<unsigned>(std::max<int64_t>(grid, 1));
}

// One block per tile (PERSISTENT false: the tile is the block index) or the persistent walk (a
// slice always walks);
// `tile(bx, by, bz)` runs one output tile and returns true when it saw the flag and stopped.
template <int BM, int BN, bool PERSISTENT, typename TileFn>
__device__ __forceinline__ void for_each_tile(const GemmParams& p, const int* flag, int& flag_seen, TileFn&& tile) {
  if constexpr (!PERSISTENT) {
    tile(static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z));
  } else {
    const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    const int per_batch = tiles_m * tiles_n;
    const int tiles = tile_range_end(p, per_batch * p.batch * p.splits);
    const int first = p.tile_begin + static_cast<int>(blockIdx.x);
    for (int t = first; t < tiles; t += gridDim.x) {
      if (t != first) {
        // The last tile's MMAs read the shared memory this tile's prologue refills.
        if (__syncthreads_or(flag_seen)) return;
        if (flag != nullptr && threadIdx.x == 0) flag_seen = load_flag(flag);
      }
      const int mn = t % per_batch;
      if (tile(mn % tiles_m, mn / tiles_m, t / per_batch)) return;
    }
  }
}

// Launches a BM x BN tiled GEMM under that contract: `persistent` over the resident blocks
// (`per_sm` per SM), or `per_tile` with one block per tile.
template <int BM, int BN>
void launch_tiled(const GemmParams& p, void (*persistent)(GemmParams, const int*),
                  void (*per_tile)(GemmParams, const int*), int per_sm, int threads, int smem_bytes, cudaStream_t s,
                  const int* flag) {
  const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
  const int64_t tiles = int64_t{tiles_m} * tiles_n * p.batch * p.splits;
  const int64_t resident = int64_t{per_sm} * device_sm_count();
  if (p.tile_end > 0 || tiles > kPersistentAfterWaves * resident) {
    persistent<<<persistent_grid(p, tiles, resident), threads, smem_bytes, s>>>(p, flag);
  } else {
    per_tile<<<dim3(tiles_m, tiles_n, p.batch * p.splits), threads, smem_bytes, s>>>(p, flag);
  }
}

}  // namespace atl::cuda::gemm
