// Fused attention: softmax(scale q k^T) v for one block of query rows of one (batch, head)
// matrix, flash-style: each warp keeps 16 query rows in registers and walks the keys in chunks of
// 64, with the chunk's scores, its probabilities and the running output all in registers
// (mma.sync m16n8k16; a score accumulator's layout is the next product's A operand) and an online
// softmax (running row maximum and sum, output rescaled when the maximum grows). k and v chunks
// stream through two shared-memory stages with cp.async, the next chunk in flight while this one
// is multiplied. The first version (scores and probabilities in shared memory, WMMA) spent its
// time on instructions: 67.7 us on BERT-base batch 32 at 1.25 instructions per cycle (ncu,
// session 24). Heads are padded with zeros to D (64 or 128), keys past the last masked.
//
// Probabilities are rounded to f16 before the second product, unnormalized (at most 1), and the
// output divided by the row sum at the end; a NaN score makes its row's outputs NaN, as the
// unfused kernels'.
//
// Preemption: thread 0 tests the flag at each chunk's barrier and the whole block stops together
// after it. The value tested at chunk c was read at chunk c - 1 (at entry for the first), so the
// read's L2 round trip runs beside a chunk's math instead of stalling the block at every barrier:
// read and tested at once, it cost BERT-base b32's attention 15% (session 31's per-family flag
// cost). A raise is seen one chunk later. Nothing is written before the last chunk, so a rerun
// is exact.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/gemm_common.cuh"
#include "core/error.h"

namespace atl::cuda {

namespace {

constexpr int kChunk = 64;  // keys per chunk and stage
// Shared memory the kernel's own variables take beside the dynamic buffers.
constexpr size_t kStaticSmemBytes = 128;

__host__ __device__ constexpr int padded_dim(int head_dim, int value_dim) {
  return (head_dim > value_dim ? head_dim : value_dim) <= 64 ? 64 : 128;
}
// Elements between rows of every buffer: 16 bytes past D, so ldmatrix's 8 rows hit 8 bank groups.
__host__ __device__ constexpr int row_pitch(int d) { return d + 8; }
__host__ __device__ constexpr size_t q_bytes(int rows, int d) { return static_cast<size_t>(rows) * row_pitch(d) * 2; }
__host__ __device__ constexpr size_t stage_bytes(int d) { return static_cast<size_t>(kChunk) * row_pitch(d) * 2; }
// q (then the output) | k stage 0 | k stage 1 | v stage 0 | v stage 1
__host__ __device__ constexpr size_t smem_total(int rows, int d) { return q_bytes(rows, d) + 4 * stage_bytes(d); }

__device__ __forceinline__ int64_t matrix_offset(const HeadStrides& h, int i) {
  return (i / h.inner) * h.outer_stride + (i % h.inner) * h.inner_stride;
}

// Rows [0, rows_pad) x columns [0, D) of `dst` from the first rows_valid x cols_valid of `src`,
// zeros elsewhere. VEC: 16-byte asynchronous copies (cols_valid, src_ld and src multiples of 8);
// the caller commits. Otherwise plain element loads (unaligned heads: rare).
template <int D, bool VEC>
__device__ void load_rows(__half* dst, const __half* src, int64_t src_ld, int rows_valid, int rows_pad,
                          int cols_valid) {
  constexpr int kUnits = D / 8;
  if constexpr (VEC) {
    for (int e = threadIdx.x; e < rows_pad * kUnits; e += blockDim.x) {
      const int r = e / kUnits, c = (e % kUnits) * 8;
      const bool valid = r < rows_valid && c < cols_valid;
      gemm::cp_async16(dst + r * row_pitch(D) + c, valid ? src + r * src_ld + c : src, valid);
    }
  } else {
    for (int e = threadIdx.x; e < rows_pad * D; e += blockDim.x) {
      const int r = e / D, c = e % D;
      dst[r * row_pitch(D) + c] = r < rows_valid && c < cols_valid ? src[r * src_ld + c] : __float2half(0.0f);
    }
  }
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// One warp's 16 query rows: thread (g = lane / 4, t = lane % 4) holds rows g and g + 8.
template <int D>
struct WarpRows {
  uint32_t q[D / 16][4];  // A fragments of q, one per 16 columns
  float o[D / 8][4];      // the output so far, one accumulator per 8 columns
  float m[2] = {-INFINITY, -INFINITY};  // running maximum of (scaled, log2) scores, rows g and g + 8
  float l[2] = {0.0f, 0.0f};            // running sum of probabilities (this thread's columns only)
};

// Scores of one chunk (16 rows x 64 keys, log2 domain, masked past `keys_left`), folded into the
// running maximum, sum and output.
template <int D>
__device__ void attend_chunk(WarpRows<D>& w, const __half* ks, const __half* vs, int keys_left, float scale_log2) {
  const int lane = threadIdx.x % 32, t = lane % 4;
  float s[kChunk / 8][4];
#pragma unroll
  for (int n = 0; n < kChunk / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int n = 0; n < kChunk / 16; ++n) {  // two 8-key tiles per ldmatrix
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      uint32_t b[4];
      const int mat = lane / 8;
      gemm::ldmatrix_x4(b, ks + (n * 16 + (mat / 2) * 8 + lane % 8) * row_pitch(D) + k * 16 + (mat % 2) * 8);
      gemm::mma16816(s[2 * n], w.q[k], b[0], b[1]);
      gemm::mma16816(s[2 * n + 1], w.q[k], b[2], b[3]);
    }
  }
  float chunk_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kChunk / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = n * 8 + 2 * t + (e % 2);
      s[n][e] = key < keys_left ? s[n][e] * scale_log2 : -INFINITY;
      chunk_max[e / 2] = fmaxf(chunk_max[e / 2], s[n][e]);
    }
  }
  float correction[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // the row's maximum over the quad that holds it
    chunk_max[h] = fmaxf(chunk_max[h], __shfl_xor_sync(0xffffffffu, chunk_max[h], 1));
    chunk_max[h] = fmaxf(chunk_max[h], __shfl_xor_sync(0xffffffffu, chunk_max[h], 2));
    const float m = fmaxf(w.m[h], chunk_max[h]);
    correction[h] = exp2f(w.m[h] - m);  // 0 on the first chunk (m is finite: one key is valid)
    w.m[h] = m;
    w.l[h] *= correction[h];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) w.o[n][e] *= correction[e / 2];
  }
  uint32_t p[kChunk / 16][4];  // probabilities as A fragments: 16 keys each
#pragma unroll
  for (int n = 0; n < kChunk / 8; ++n) {
    const float p0 = exp2f(s[n][0] - w.m[0]), p1 = exp2f(s[n][1] - w.m[0]);
    const float p2 = exp2f(s[n][2] - w.m[1]), p3 = exp2f(s[n][3] - w.m[1]);
    w.l[0] += p0 + p1;
    w.l[1] += p2 + p3;
    p[n / 2][(n % 2) * 2] = pack_half2(p0, p1);
    p[n / 2][(n % 2) * 2 + 1] = pack_half2(p2, p3);
  }
#pragma unroll
  for (int k = 0; k < kChunk / 16; ++k) {
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {  // two 8-column tiles per ldmatrix
      uint32_t b[4];
      const int mat = lane / 8;
      gemm::ldmatrix_x4_trans(b, vs + (k * 16 + (mat % 2) * 8 + lane % 8) * row_pitch(D) + n * 16 + (mat / 2) * 8);
      gemm::mma16816(w.o[2 * n], p[k], b[0], b[1]);
      gemm::mma16816(w.o[2 * n + 1], p[k], b[2], b[3]);
    }
  }
}

template <int D, bool VEC>
__global__ void __launch_bounds__(128) attention_kernel(const AttentionArgs p, const int* flag) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int stop;
  const int rows = p.tile_rows, i = static_cast<int>(blockIdx.y), q0 = static_cast<int>(blockIdx.x) * rows;
  const int valid_rows = min(rows, p.queries - q0);
  auto* qs = reinterpret_cast<__half*>(smem);
  auto* ks = reinterpret_cast<__half*>(smem + q_bytes(rows, D));
  auto* vs = reinterpret_cast<__half*>(smem + q_bytes(rows, D) + 2 * stage_bytes(D));
  const __half* kg = p.k + matrix_offset(p.ks, i);
  const __half* vg = p.v + matrix_offset(p.vs, i);
  const auto load_chunk = [&](int c) {
    const int k0 = c * kChunk, stage = c % 2;
    load_rows<D, VEC>(ks + stage * kChunk * row_pitch(D), kg + k0 * p.ks.ld, p.ks.ld, p.keys - k0, kChunk, p.head_dim);
    load_rows<D, VEC>(vs + stage * kChunk * row_pitch(D), vg + k0 * p.vs.ld, p.vs.ld, p.keys - k0, kChunk, p.value_dim);
  };
  // Thread 0's read for the next barrier, issued a chunk ahead.
  int pending = (flag != nullptr && threadIdx.x == 0) ? load_flag(flag) : 0;
  load_rows<D, VEC>(qs, p.q + matrix_offset(p.qs, i) + q0 * p.qs.ld, p.qs.ld, valid_rows, rows, p.head_dim);
  load_chunk(0);
  gemm::cp_async_commit();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const int chunks = (p.keys + kChunk - 1) / kChunk;
  WarpRows<D> w;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) w.o[n][0] = w.o[n][1] = w.o[n][2] = w.o[n][3] = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) load_chunk(c + 1);  // its stage was freed by the last chunk's barrier
    gemm::cp_async_commit();
    if (threadIdx.x == 0) {
      stop = pending;
      if (flag != nullptr) pending = load_flag(flag);
    }
    gemm::cp_async_wait<1>();  // everything but the chunk just started
    __syncthreads();
    if (stop != 0) return;  // the whole block: `stop` is shared
    if (c == 0) {
#pragma unroll
      for (int k = 0; k < D / 16; ++k) {
        gemm::ldmatrix_x4(w.q[k], qs + (warp * 16 + lane % 16) * row_pitch(D) + k * 16 + (lane / 16) * 8);
      }
    }
    const int stage = c % 2;
    attend_chunk<D>(w, ks + stage * kChunk * row_pitch(D), vs + stage * kChunk * row_pitch(D), p.keys - c * kChunk,
                    scale_log2);
    __syncthreads();  // this stage is read: the next iteration's copies may overwrite it
  }
  // Each row's sum over the quad, then the output (f16) through q's rows to 16-byte stores.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    w.l[h] += __shfl_xor_sync(0xffffffffu, w.l[h], 1);
    w.l[h] += __shfl_xor_sync(0xffffffffu, w.l[h], 2);
    w.l[h] = 1.0f / w.l[h];
  }
  __half* orow = qs + (warp * 16 + g) * row_pitch(D) + 2 * t;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<uint32_t*>(orow + n * 8) = pack_half2(w.o[n][0] * w.l[0], w.o[n][1] * w.l[0]);
    *reinterpret_cast<uint32_t*>(orow + 8 * row_pitch(D) + n * 8) = pack_half2(w.o[n][2] * w.l[1], w.o[n][3] * w.l[1]);
  }
  __syncthreads();
  __half* y = p.y + matrix_offset(p.ys, i) + q0 * p.ys.ld;
  if constexpr (VEC) {
    const int units = p.value_dim / 8;
    for (int e = threadIdx.x; e < valid_rows * units; e += blockDim.x) {
      const int r = e / units, c = (e % units) * 8;
      *reinterpret_cast<uint4*>(y + r * p.ys.ld + c) = *reinterpret_cast<const uint4*>(qs + r * row_pitch(D) + c);
    }
  } else {
    for (int e = threadIdx.x; e < valid_rows * p.value_dim; e += blockDim.x) {
      const int r = e / p.value_dim, c = e % p.value_dim;
      y[r * p.ys.ld + c] = qs[r * row_pitch(D) + c];
    }
  }
}

}  // namespace

size_t attention_smem_bytes(int tile_rows, int head_dim, int value_dim) {
  return smem_total(tile_rows, padded_dim(head_dim, value_dim));
}

int attention_tile_rows(int queries, int head_dim, int value_dim, size_t smem_optin) {
  for (const int rows : {64, 32, 16}) {
    if (rows > 16 && (queries + 15) / 16 * 16 <= rows / 2) continue;  // half the tile covers every query
    if (attention_smem_bytes(rows, head_dim, value_dim) + kStaticSmemBytes <= smem_optin) return rows;
  }
  return 0;
}

int attention_grid_rows(int fitting_rows, int matrices, int queries, int sm_count) {
  int rows = fitting_rows;
  const auto blocks = [&](int r) { return static_cast<int64_t>(matrices) * ((queries + r - 1) / r); };
  while (rows > 16 && blocks(rows) < 2 * static_cast<int64_t>(sm_count)) rows /= 2;
  return rows;
}

void prepare_attention_kernels(size_t smem_optin) {
  const int dynamic = static_cast<int>(smem_optin - std::min(smem_optin, kStaticSmemBytes));
  for (const auto kernel : {attention_kernel<64, true>, attention_kernel<64, false>, attention_kernel<128, true>,
                            attention_kernel<128, false>}) {
    ATL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
  }
}

void launch_attention(const AttentionArgs& p, cudaStream_t s, const int* flag, const char* name) {
  const int d = padded_dim(p.head_dim, p.value_dim);
  const size_t smem = smem_total(p.tile_rows, d);
  const dim3 grid(static_cast<unsigned>((p.queries + p.tile_rows - 1) / p.tile_rows), static_cast<unsigned>(p.matrices));
  const int threads = p.tile_rows * 2;  // one warp per 16 query rows
  const auto kernel = d == 64 ? (p.vec ? attention_kernel<64, true> : attention_kernel<64, false>)
                              : (p.vec ? attention_kernel<128, true> : attention_kernel<128, false>);
  kernel<<<grid, threads, smem, s>>>(p, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
