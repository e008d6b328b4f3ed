#pragma once
// Launch parameters of every CUDA kernel family, and their launchers. Entry points (ops_*.cpp)
// fill these once at load; the launchers (*.cu) only enqueue. Plain structs, passed by value.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/engine_limits.h"

namespace atl::cuda {

// Mirrors atl::Act; fused into epilogues.
enum ActCode : int { kActNone = 0, kActRelu, kActRelu6, kActGelu, kActTanh };

constexpr int kMaxRank = 6;
// Memory-bound kernels index with 32-bit integers (64-bit division is several times slower);
// the registry refuses tensors above this many elements.
constexpr int64_t kMaxElements = int64_t{1} << 30;

// ---- tensor-core GEMM / implicit-GEMM convolution (gemm.cu) ---------------------------------
// C[b][m][n] = act(alpha * sum_k A[b][m][k] * B[b][n][k] + bias[b][n] + residual[b][m][n]).
// A is an implicit im2col of an NHWC image: row m is output pixel (img, oh, ow), column k is
// (tap r, tap s, channel c) with c fastest. A plain row-major [M, K] matrix is the 1x1 case with
// in_h = out_h = 1 and in_w = out_w = M. `b` indexes groups (conv) or matrices (batched MatMul).
struct GemmParams {
  const __half* a = nullptr;
  const __half* b = nullptr;
  __half* c = nullptr;
  const float* bias = nullptr;       // optional
  const __half* residual = nullptr;  // optional; same indexing as c
  float* partial = nullptr;          // split-K workspace [splits][batch][M][N]
  int batch = 1, M = 0, N = 0, K = 0;
  int in_h = 1, in_w = 1, in_c = 0;  // in_c: elements between consecutive pixels of A
  int cg = 0;                        // channels per tap (K = taps * cg)
  int kw = 1, stride_h = 1, stride_w = 1, pad_t = 0, pad_l = 0, dil_h = 1, dil_w = 1;
  int out_h = 1, out_w = 1;
  int64_t a_batch_stride = 0, b_batch_stride = 0, c_batch_stride = 0;
  // Above 0, matrix i of each operand starts at (i / batch_inner) * X_outer_stride + (i %
  // batch_inner) * X_batch_stride: attention heads read from and written to [B, S, H, D].
  int batch_inner = 0;
  int64_t a_outer_stride = 0, b_outer_stride = 0, c_outer_stride = 0;
  int bias_batch_stride = 0;
  // Above 0 (grouped Gemms): output column n goes to segment n / n_segment, which starts
  // c_segment_stride elements after the previous one, as its column n % n_segment. A multiple of
  // kGemmSegmentColumns and of the tile's N.
  int n_segment = 0;
  int64_t c_segment_stride = 0;
  int ldb = 0;  // [N, K] layout: row stride of B over n; [K, N] layout: row stride over k
  int ldc = 0;
  float alpha = 1.0f;
  int act = kActNone;
  int splits = 1, k_tiles_per_split = 0;
  int check_tiles = 4;  // TMA kernels: K tiles between flag checks, a power of two
  int epi_check_chunks = 2;  // wgmma epilogues: 32-column chunks between flag checks, a power of two
  // A padding slice: tile_end above 0 runs only tiles [tile_begin, tile_end) of the order the
  // persistent walk takes (split-K: each split of each output tile, gemm_launch_tiles), on at most
  // max_blocks blocks (0: as many as are resident). Each tile writes only its own outputs (or
  // partials), and the split-K reduction runs behind the slice that ends at the last tile, so
  // slices that cover every tile once, in order, equal one whole launch.
  int tile_begin = 0, tile_end = 0, max_blocks = 0;
};

// mma.sync tiles (any sm_80+), then the Hopper wgmma tiles (sm_90a builds on sm_90 devices).
// The TMA-fed tiles (kT*) come last: they read only the A operands a tensor map can (tma_gemm_applies).
enum class GemmTile : uint8_t {
  k128x128,
  k128x64,
  k64x64,
  k32x64,
  kGemv,  // not a tile: one warp per output column, up to kGemvMaxRows rows (gemv.cu)
  kW128x128,
  kW128x64,
  kW64x128,
  kW64x64,
  kT128x128,
  kT128x256,
  kT128x64,
  kP128x128,  // TMA-fed, ping-pong consumers: each warpgroup a whole 128 x 128 tile
  kD128x64,   // TMA-fed 128 x 64 in fewer stages, two blocks per SM (one's epilogue beside the other's MMAs)
  kC256x256,  // TMA-fed 256 x 256 on a cluster of two blocks (128 rows each) that multicast B's halves
  kC256x128,  // the same, 256 x 128
  kC256x512   // 256 x 512 on a cluster of 2 x 2 blocks (128 x 256 each) that multicast A's and B's halves
};

struct GemmConfig {
  GemmTile tile = GemmTile::k64x64;
  bool vec = true;    // 16-byte cp.async loads (channels, K and strides multiples of 8)
  bool b_kn = false;  // B stored [K, N] (MatMul without trans_b) instead of [N, K]
};

// Every tile's N divides this, so a grouped Gemm whose segments (GemmParams::n_segment) are its
// multiples has each output tile in one segment.
constexpr int kGemmSegmentColumns = static_cast<int>(kEngineGemmSegmentColumns);
constexpr int kGemmTileK = 32;       // K per pipeline stage of the mma.sync kernel
constexpr int kWgmmaGemmTileK = 64;  // of the wgmma kernel (one 128-byte swizzle row)
int gemm_tile_m(GemmTile t);
// The tiles one launch of `p` on tile `t` walks: output tiles x batch x splits.
int64_t gemm_launch_tiles(const GemmParams& p, GemmTile t);
int gemm_tile_n(GemmTile t);
int gemm_tile_k(GemmTile t);
bool gemm_tile_is_wgmma(GemmTile t);  // the TMA tiles are wgmma tiles too
bool gemm_tile_is_tma(GemmTile t);
bool gemm_tile_is_pingpong(GemmTile t);
bool gemm_tile_is_dual(GemmTile t);  // two blocks per SM (kD128x64)
bool gemm_tile_is_cluster(GemmTile t);  // the blocks of a cluster per tile (kC256x256, kC256x128, kC256x512)
// The GEMV path (gemv.cu): batch-1 GEMMs of at most this many rows with a plain row-major A.
constexpr int kGemvMaxRows = 8;
bool gemv_applies(const GemmParams& p);
void launch_gemv(const GemmParams& p, cudaStream_t s, const int* flag, const char* name);
// Whether this build holds the wgmma kernels (an sm_90a architecture was built).
bool wgmma_gemm_built();
void prepare_wgmma_gemm(GemmTile tile);
void launch_wgmma_gemm(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name);
// Whether the TMA tiles can read this GEMM: one batch, A a plain row-major [M, K] (Gemm, MatMul,
// 1x1 stride-1 convolutions) or a convolution's im2col with channels a multiple of 64, 16-byte
// aligned operands and row strides.
bool tma_gemm_applies(const GemmParams& p);
// Whether A is a plain row-major [M, K] (no im2col walk).
bool tma_reads_plain_a(const GemmParams& p);
void prepare_tma_gemm(GemmTile tile);
void launch_tma_gemm(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name);
// The cluster tile (gemm_sm90_cluster.cu): whether the device runs its clusters (at least one
// resident pair of SMs for its shared memory), and its prepare and launch.
bool cluster_gemm_supported();
void prepare_cluster_gemm(GemmTile tile);
void launch_cluster_gemm(const GemmParams& p, GemmTile tile, cudaStream_t s, const int* flag, const char* name);
// Raises the dynamic shared-memory limit of the kernel `cfg` selects; call at load.
void prepare_gemm_kernel(const GemmConfig& cfg);
// Enqueues the GEMM and, when p.splits > 1, the deterministic split-K reduction.
void launch_gemm(const GemmParams& p, const GemmConfig& cfg, cudaStream_t s, const int* flag, const char* name);

// ---- direct convolutions (conv_direct.cu) ---------------------------------------------------
// Depthwise convolutions over NHWC with filters stored [kh][kw][C][1]: one filter per channel.
struct DirectConvParams {
  const __half* x = nullptr;
  const __half* w = nullptr;
  const float* bias = nullptr;
  const __half* residual = nullptr;
  __half* y = nullptr;
  int n = 0, h = 0, w_in = 0, c = 0, o = 0;
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_t = 0, pad_l = 0, dil_h = 1, dil_w = 1;
  int out_h = 0, out_w = 0;
  int act = kActNone;
};
void launch_depthwise(const DirectConvParams& p, cudaStream_t s, const int* flag, const char* name);
// Channels an image stem's input and filter are padded to, so the implicit GEMM loads them 16 bytes
// at a time. An image stem's NHWC input (c <= kStemChannels) is rewritten with kStemChannels, zeros
// past c.
constexpr int kStemChannels = 8;
struct PadChannelsParams {
  const __half* x = nullptr;
  __half* y = nullptr;
  int64_t pixels = 0;
  int c = 0;
};
void launch_pad_channels(const PadChannelsParams& p, cudaStream_t s, const int* flag, const char* name);

// ---- pooling (pool.cu), NHWC --------------------------------------------------------------
struct PoolArgs {
  const __half* x = nullptr;
  __half* y = nullptr;
  int n = 0, h = 0, w = 0, c = 0;
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_t = 0, pad_l = 0;
  int out_h = 0, out_w = 0;
  bool is_max = true;
  bool count_include_pad = true;
};
void launch_pool(const PoolArgs& p, cudaStream_t s, const int* flag, const char* name);
struct GlobalPoolArgs {
  const __half* x = nullptr;
  __half* y = nullptr;
  int n = 0, hw = 0, c = 0;
};
void launch_global_avg_pool(const GlobalPoolArgs& p, cudaStream_t s, const int* flag, const char* name);

// ---- elementwise (elementwise.cu) -----------------------------------------------------------
// Unary ops: the activations (kUnaryAct applies `act`) and the imported models' math. NaN passes
// through Clip, HardSigmoid and HardSwish as on the CPU backend.
enum UnaryCode : int {
  kUnaryAct = 0,      // act(x)
  kUnarySigmoid,      // 1 / (1 + exp(-x))
  kUnaryHardSigmoid,  // clamp(a x + b, 0, 1)
  kUnaryHardSwish,    // x clamp(x / 6 + 1/2, 0, 1)
  kUnaryErf,
  kUnarySqrt,
  kUnaryClip,  // clamp(x, a, b); an absent bound is an infinity
};
struct UnaryArgs {
  const __half* x = nullptr;
  __half* y = nullptr;
  int n = 0;
  int op = kUnaryAct;
  int act = kActNone;
  float a = 0.0f, b = 0.0f;  // HardSigmoid: alpha, beta; Clip: min, max
};
void launch_unary(const UnaryArgs& p, cudaStream_t s, const int* flag, const char* name);

enum BinaryCode : int { kBinaryAdd = 0, kBinarySub, kBinaryMul, kBinaryDiv, kBinaryPow };

// y = act(a op b) with NumPy broadcasting; strides are 0 along broadcast axes.
struct BinaryArgs {
  const __half* a = nullptr;
  const __half* b = nullptr;
  __half* y = nullptr;
  int n = 0;
  int rank = 0;
  int out_dims[kMaxRank] = {};
  int a_strides[kMaxRank] = {};
  int b_strides[kMaxRank] = {};
  bool same_shape = false;
  int op = kBinaryAdd;
  int act = kActNone;
};
void launch_binary(const BinaryArgs& p, cudaStream_t s, const int* flag, const char* name);

// y = act(x * scale[c] + shift[c]); c = (i / inner) % channels.
struct ScaleShiftArgs {
  const __half* x = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  __half* y = nullptr;
  int n = 0;
  int channels = 0, inner = 1;
  int act = kActNone;
};
void launch_scale_shift(const ScaleShiftArgs& p, cudaStream_t s, const int* flag, const char* name);

// ---- data movement (data.cu) ----------------------------------------------------------------
// y[o] = x[offset + sum_d o_d * in_strides[d]] over the dense output index o: Transpose,
// layout casts and Slice are all this one gather.
struct StridedCopyArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int n = 0;
  int rank = 0;
  int out_dims[kMaxRank] = {};
  int in_strides[kMaxRank] = {};
  int offset = 0;
  int elem_size = 2;
};
void launch_strided_copy(const StridedCopyArgs& p, cudaStream_t s, const int* flag, const char* name);

// Concatenation viewed as rows: output row r = [part0 row r | part1 row r | ...].
constexpr int kMaxConcatParts = 48;
struct ConcatArgs {
  void* y = nullptr;
  int rows = 0;
  int out_row = 0;  // elements per output row
  int count = 0;
  int elem_size = 2;
  struct Part {
    const void* x;
    int row;     // elements per row of this part
    int offset;  // where its row starts in the output row
  } parts[kMaxConcatParts] = {};
  int max_part_elems = 0;  // rows * max(part row)
};
void launch_concat(const ConcatArgs& p, cudaStream_t s, const int* flag, const char* name);

// y[i][:] = table[clamp(idx[i])][:]; an out-of-range index sets *error_flag.
struct GatherArgs {
  const __half* table = nullptr;
  const int64_t* idx = nullptr;
  __half* y = nullptr;
  int rows = 0;
  int vocab = 0;
  int d = 0;
  int* error_flag = nullptr;
};
void launch_gather(const GatherArgs& p, cudaStream_t s, const int* flag, const char* name);

// ---- reductions and casts (math.cu) ---------------------------------------------------------
// ReduceMean of a dense tensor over any set of axes. Output o starts at input offset
// sum_d (o's coordinate over kept_dims)_d * kept_strides[d]; reduced element r lies at that
// plus sum_d (r's coordinate over red_dims)_d * red_strides[d]. Runs of neighbouring axes that
// are all kept or all reduced are merged, so the innermost input axis is kept_dims' last
// (stride 1) or red_dims' last (stride 1).
struct ReduceMeanArgs {
  const __half* x = nullptr;
  __half* y = nullptr;
  int outputs = 0, reduced = 0;
  int kept_rank = 0, red_rank = 0;
  int kept_dims[kMaxRank] = {};
  int kept_strides[kMaxRank] = {};
  int red_dims[kMaxRank] = {};
  int red_strides[kMaxRank] = {};
  bool inner_reduced = false;  // the innermost input axis is reduced: one warp per output
};
void launch_reduce_mean(const ReduceMeanArgs& p, cudaStream_t s, const int* flag, const char* name);

// Cast between f16 storage and integers, by value: integers -> f16 rounds to nearest; f16 ->
// integers truncates toward zero (NaN -> 0, out-of-range values saturate).
enum CastCode : int { kCastI64ToHalf = 0, kCastI32ToHalf, kCastHalfToI64, kCastHalfToI32 };
struct CastArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int n = 0;
  int op = kCastI64ToHalf;
};
void launch_cast(const CastArgs& p, cudaStream_t s, const int* flag, const char* name);

// ---- normalization (norm.cu) ----------------------------------------------------------------
// Softmax along an axis of length `len`; consecutive axis elements are `inner` apart.
struct SoftmaxArgs {
  const __half* x = nullptr;
  // When set, read instead of x: the f32 values of a graph input as the host sent them, so that
  // rows f16 cannot tell apart (10000..10003 are 8 apart in f16) keep their differences.
  const float* x_f32 = nullptr;
  __half* y = nullptr;
  int outer = 0;
  int len = 0;
  int inner = 1;
};
void launch_softmax(const SoftmaxArgs& p, cudaStream_t s, const int* flag, const char* name);

struct LayerNormArgs {
  const __half* x = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  __half* y = nullptr;
  int rows = 0;
  int d = 0;
  float epsilon = 1e-5f;
};
void launch_layer_norm(const LayerNormArgs& p, cudaStream_t s, const int* flag, const char* name);

// ---- attention (attention.cu) ---------------------------------------------------------------
// Where matrix i of a batched operand starts (MatrixStrides, as int64 elements): i = i0 * inner +
// i1 at i0 * outer_stride + i1 * inner_stride, rows ld apart.
struct HeadStrides {
  int64_t inner = 1, outer_stride = 0, inner_stride = 0, ld = 0;
};
// softmax(scale q k^T) v for `matrices` (batch x heads) matrices of `queries` x `head_dim` q,
// `keys` x `head_dim` k and `keys` x `value_dim` v: one block per `tile_rows` queries of one
// matrix, one warp per 16 of them, keys in chunks through shared memory (attention.cu).
struct AttentionArgs {
  const __half* q = nullptr;
  const __half* k = nullptr;
  const __half* v = nullptr;
  __half* y = nullptr;
  HeadStrides qs, ks, vs, ys;
  int matrices = 0, queries = 0, keys = 0, head_dim = 0, value_dim = 0;
  int tile_rows = 64;  // 16, 32 or 64 (attention_tile_rows, attention_grid_rows)
  float scale = 1.0f;
  bool vec = false;    // every row of q, k and v starts 16-byte aligned and holds whole 8-half units
};
// Keys stream through the kernel in chunks, so their count costs time, not shared memory; the
// limit only keeps one block's walk (and its stop latency between chunks) bounded.
constexpr int kAttentionMaxKeys = static_cast<int>(kEngineAttentionMaxKeys);
constexpr int kAttentionMaxHeadDim = static_cast<int>(kEngineAttentionMaxHeadDim);
// The query rows per block (64, 32 or 16) whose buffers fit `smem_optin`, the shared memory one
// block may take (0: none fits), never a tile twice the queries; a block's bytes.
int attention_tile_rows(int queries, int head_dim, int value_dim, size_t smem_optin);
size_t attention_smem_bytes(int tile_rows, int head_dim, int value_dim);
// The query rows per block for a grid: `fitting_rows` (attention_tile_rows) halved, down to 16,
// while the grid has fewer than two blocks per SM. A block's steps are mostly waits on memory, so
// a small batch runs faster on more, smaller blocks that each read the whole of k and v.
int attention_grid_rows(int fitting_rows, int matrices, int queries, int sm_count);
// Lets the kernels take up to `smem_optin` of shared memory (at load).
void prepare_attention_kernels(size_t smem_optin);
void launch_attention(const AttentionArgs& p, cudaStream_t s, const int* flag, const char* name);

}  // namespace atl::cuda
