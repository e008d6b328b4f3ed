// Fused attention: softmax(scale q k^T) v for one block of query rows of one (batch, head)
// matrix, with q, k (then v), the scores and the probabilities in shared memory, so neither the
// scores nor the probabilities go through global memory and one launch replaces three. The
// products run on the tensor cores through WMMA 16x16x16 fragments (operands padded to 16 with
// zeros); the softmax rounds the probabilities to f16 before the second product, as the unfused
// Softmax kernel's output is, so both paths see the same probabilities to within rounding.
//
// Preemption: one flag read at entry and one between the two products, each broadcast through
// shared memory so the whole block stops together (before it writes anything). A block runs
// for a few microseconds, and the kernel only reads q, k and v, so a rerun is exact.
#include <mma.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "core/error.h"

namespace atl::cuda {

namespace {

using namespace nvcuda;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Shared memory the kernel's own variables take beside the dynamic buffers.
constexpr size_t kStaticSmemBytes = 128;

__host__ __device__ constexpr int round16(int x) { return (x + 15) / 16 * 16; }
__host__ __device__ constexpr size_t align128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// The shared-memory buffers of one block, in elements between rows and bytes from the start:
// q (rows x head), k and later v (keys x head), the scores and later the output (f32), the
// probabilities (f16). Rows padded by 16 bytes so WMMA's row loads spread over the banks.
struct SmemLayout {
  int ldq = 0, ldkv = 0, lds = 0, ldp = 0;
  size_t q = 0, kv = 0, s = 0, p = 0, total = 0;
};

__host__ __device__ inline SmemLayout smem_layout(int rows, int keys, int head_dim, int value_dim) {
  const int dp = round16(head_dim), dvp = round16(value_dim), tp = round16(keys);
  SmemLayout l;
  l.ldq = dp + 8;
  l.ldkv = (dp > dvp ? dp : dvp) + 8;
  l.lds = (tp > dvp ? tp : dvp) + 4;
  l.ldp = tp + 8;
  l.kv = align128(static_cast<size_t>(rows) * l.ldq * 2);
  l.s = l.kv + align128(static_cast<size_t>(tp) * l.ldkv * 2);
  l.p = l.s + align128(static_cast<size_t>(rows) * l.lds * 4);
  l.total = l.p + align128(static_cast<size_t>(rows) * l.ldp * 2);
  return l;
}

__device__ __forceinline__ int64_t matrix_offset(const HeadStrides& h, int i) {
  return (i / h.inner) * h.outer_stride + (i % h.inner) * h.inner_stride;
}

// Rows [0, rows_pad) x columns [0, cols_pad) of `dst`, from the first rows_valid x cols_valid of
// `src` and zeros elsewhere. VEC: 8 halves per access (cols_valid, src_ld and src multiples of 8).
template <bool VEC>
__device__ void load_rows(__half* dst, int ld, const __half* src, int64_t src_ld, int rows_valid, int rows_pad,
                          int cols_valid, int cols_pad) {
  if constexpr (VEC) {
    const int units = cols_pad / 8;
    for (int e = threadIdx.x; e < rows_pad * units; e += kThreads) {
      const int r = e / units, c = (e % units) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < rows_valid && c < cols_valid) v = *reinterpret_cast<const uint4*>(src + r * src_ld + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = v;
    }
  } else {
    for (int e = threadIdx.x; e < rows_pad * cols_pad; e += kThreads) {
      const int r = e / cols_pad, c = e % cols_pad;
      dst[r * ld + c] = r < rows_valid && c < cols_valid ? src[r * src_ld + c] : __float2half(0.0f);
    }
  }
}

// C (rows x cols, f32, ldc) = A (rows x depth, row-major) times B, both f16 in shared memory, B
// read column-major (k^T from k's rows) or row-major (v); 16x16 output tiles spread over the warps.
template <typename BLayout>
__device__ void product(const __half* a, int lda, const __half* b, int ldb, float* c, int ldc, int rows, int cols,
                        int depth, float scale) {
  const int tiles_c = cols / 16;
  for (int t = threadIdx.x / 32; t < (rows / 16) * tiles_c; t += kWarps) {
    const int r0 = (t / tiles_c) * 16, c0 = (t % tiles_c) * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < depth; k0 += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, BLayout> fb;
      wmma::load_matrix_sync(fa, a + r0 * lda + k0, lda);
      if constexpr (std::is_same_v<BLayout, wmma::col_major>) {
        wmma::load_matrix_sync(fb, b + c0 * ldb + k0, ldb);
      } else {
        wmma::load_matrix_sync(fb, b + k0 * ldb + c0, ldb);
      }
      wmma::mma_sync(acc, fa, fb, acc);
    }
    for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= scale;
    wmma::store_matrix_sync(c + r0 * ldc + c0, acc, ldc, wmma::mem_row_major);
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Each row of scores (f32) to probabilities (f16, zeros past the last key), one warp per row.
// A NaN score makes its row's sum NaN, so the row's outputs are NaN as the unfused kernels'.
__device__ void softmax_rows(const float* s, int lds, __half* p, int ldp, int rows, int keys, int keys_pad) {
  const int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < rows; r += kWarps) {
    const float* sr = s + r * lds;
    float m = -INFINITY;
    for (int c = lane; c < keys; c += 32) m = fmaxf(m, sr[c]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int c = lane; c < keys; c += 32) sum += __expf(sr[c] - m);
    const float inv = 1.0f / warp_sum(sum);
    for (int c = lane; c < keys_pad; c += 32) {
      p[r * ldp + c] = __float2half(c < keys ? __expf(sr[c] - m) * inv : 0.0f);
    }
  }
}

template <bool VEC>
__device__ void store_rows(const float* o, int ldo, __half* y, int64_t ldy, int rows, int cols) {
  if constexpr (VEC) {
    const int units = cols / 8;
    for (int e = threadIdx.x; e < rows * units; e += kThreads) {
      const int r = e / units, c = (e % units) * 8;
      __align__(16) __half h[8];
      for (int j = 0; j < 8; ++j) h[j] = __float2half(o[r * ldo + c + j]);
      *reinterpret_cast<uint4*>(y + r * ldy + c) = *reinterpret_cast<const uint4*>(h);
    }
  } else {
    for (int e = threadIdx.x; e < rows * cols; e += kThreads) {
      const int r = e / cols, c = e % cols;
      y[r * ldy + c] = __float2half(o[r * ldo + c]);
    }
  }
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads) attention_kernel(const AttentionArgs p, const int* flag) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int stop;
  const int rows = p.tile_rows, i = static_cast<int>(blockIdx.y), q0 = static_cast<int>(blockIdx.x) * rows;
  const int valid_rows = min(rows, p.queries - q0);
  const int dp = round16(p.head_dim), dvp = round16(p.value_dim), tp = round16(p.keys);
  const SmemLayout l = smem_layout(rows, p.keys, p.head_dim, p.value_dim);
  auto* qs = reinterpret_cast<__half*>(smem + l.q);
  auto* kv = reinterpret_cast<__half*>(smem + l.kv);
  auto* sc = reinterpret_cast<float*>(smem + l.s);
  auto* pr = reinterpret_cast<__half*>(smem + l.p);

  if (threadIdx.x == 0) stop = flag != nullptr ? __ldca(flag) : 0;
  load_rows<VEC>(qs, l.ldq, p.q + matrix_offset(p.qs, i) + q0 * p.qs.ld, p.qs.ld, valid_rows, rows, p.head_dim, dp);
  load_rows<VEC>(kv, l.ldkv, p.k + matrix_offset(p.ks, i), p.ks.ld, p.keys, tp, p.head_dim, dp);
  __syncthreads();
  if (stop != 0) return;  // the whole block: `stop` is shared
  product<wmma::col_major>(qs, l.ldq, kv, l.ldkv, sc, l.lds, rows, tp, dp, p.scale);
  __syncthreads();  // k is read: v takes its place
  if (threadIdx.x == 0) stop = flag != nullptr ? load_flag(flag) : 0;
  load_rows<VEC>(kv, l.ldkv, p.v + matrix_offset(p.vs, i), p.vs.ld, p.keys, tp, p.value_dim, dvp);
  softmax_rows(sc, l.lds, pr, l.ldp, rows, p.keys, tp);
  __syncthreads();
  if (stop != 0) return;
  product<wmma::row_major>(pr, l.ldp, kv, l.ldkv, sc, l.lds, rows, dvp, tp, 1.0f);  // scores are read
  __syncthreads();
  store_rows<VEC>(sc, l.lds, p.y + matrix_offset(p.ys, i) + q0 * p.ys.ld, p.ys.ld, valid_rows, p.value_dim);
}

}  // namespace

size_t attention_smem_bytes(int tile_rows, int keys, int head_dim, int value_dim) {
  return smem_layout(tile_rows, keys, head_dim, value_dim).total;
}

int attention_tile_rows(int queries, int keys, int head_dim, int value_dim, size_t smem_optin) {
  for (const int rows : {64, 32, 16}) {
    if (rows > 16 && round16(queries) <= rows / 2) continue;  // half the tile covers every query
    if (attention_smem_bytes(rows, keys, head_dim, value_dim) + kStaticSmemBytes <= smem_optin) return rows;
  }
  return 0;
}

int attention_max_keys(int head_dim, size_t smem_optin) {
  int keys = kAttentionMaxKeys;
  while (keys > 0 && attention_tile_rows(16, keys, head_dim, head_dim, smem_optin) == 0) keys -= 16;
  return keys;
}

void prepare_attention_kernels(size_t smem_optin) {
  const int dynamic = static_cast<int>(smem_optin - std::min(smem_optin, kStaticSmemBytes));
  for (const auto kernel : {attention_kernel<true>, attention_kernel<false>}) {
    ATL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
  }
}

void launch_attention(const AttentionArgs& p, cudaStream_t s, const int* flag, const char* name) {
  const size_t smem = attention_smem_bytes(p.tile_rows, p.keys, p.head_dim, p.value_dim);
  const dim3 grid(static_cast<unsigned>((p.queries + p.tile_rows - 1) / p.tile_rows), static_cast<unsigned>(p.matrices));
  if (p.vec) {
    attention_kernel<true><<<grid, kThreads, smem, s>>>(p, flag);
  } else {
    attention_kernel<false><<<grid, kThreads, smem, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
