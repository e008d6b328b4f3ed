#pragma once
// The Hopper (sm_90a) Tensor Memory Accelerator and transaction barriers the TMA-fed GEMM uses:
// one PTX instruction per wrapper. An mbarrier completes a phase when its expected arrivals have
// arrived and the bytes announced with expect_tx have landed; waiters test the phase by parity.
#include <cuda.h>

#include <cstdint>

#include "backends/cuda/wgmma.cuh"

namespace atl::cuda::gemm {

#if defined(ATL_WGMMA_DEVICE)

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes initialized barriers visible to the async proxy (the TMA unit) before the first copy.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of copies completing on this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Whether the phase of parity `parity` has completed, acquiring its writes for this block, or
// with kCluster for the cluster (phases that other blocks' arrivals complete).
template <bool kCluster = false>
__device__ __forceinline__ bool mbar_done(uint32_t bar, uint32_t parity) {
  uint32_t done;
  if constexpr (kCluster) {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } else {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  }
  return done != 0;
}
template <bool kCluster = false>
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_done<kCluster>(bar, parity)) {
  }
}

// A 2-D box of the tensor `map` at element coordinates (c0 innermost, c1) into shared memory at
// `dst`, completing `bytes` on barrier `bar`. Out-of-range elements arrive as zeros.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// 128 pixels of an im2col walk (tensor map made by cuTensorMapEncodeIm2col over an NHWC image,
// coordinates innermost first: channel c, then the window's top-left input pixel w, h of image
// n) into shared memory, each pixel's channels [c, c + box) at input position (w + off_w, h +
// off_h): one K tile of a convolution's A operand for filter tap (off_h, off_w), each offset
// 0-255 for a rank-4 map. Pixels outside the image arrive as zeros (the padding).
__device__ __forceinline__ void tma_load_im2col_4d(uint32_t dst, const CUtensorMap* map, int c, int w, int h, int n,
                                                   uint16_t off_w, uint16_t off_h, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(off_w), "h"(off_h)
      : "memory");
}
// tma_load_im2col_4d into the same offset `dst` of every block of the cluster in `mask`.
__device__ __forceinline__ void tma_load_im2col_4d_multicast(uint32_t dst, const CUtensorMap* map, int c, int w, int h,
                                                             int n, uint16_t off_w, uint16_t off_h, uint32_t bar,
                                                             uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%2, %3, %4, %5}], [%6], {%7, %8}, %9;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(off_w), "h"(off_h), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Clusters (gemm_sm90_cluster.cu): a block's rank in its cluster, the cluster's index and count
// in the grid (one-dimensional clusters along x).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_index() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_count() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster meets here; writes before it (shared memory of any
// block of the cluster, barrier initializations) are visible after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}
// The address in block `rank`'s shared memory of the variable at `local` in this block's.
__device__ __forceinline__ uint32_t cluster_peer_addr(uint32_t local, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(local), "r"(rank));
  return r;
}
// An arrival on barrier `bar` of block `rank` (any block of the cluster, this one included),
// releasing this thread's earlier writes to the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_peer_addr(bar, rank))
               : "memory");
}
__device__ __forceinline__ void st_cluster(uint32_t local, uint32_t rank, int v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(cluster_peer_addr(local, rank)), "r"(v) : "memory");
}
// tma_load_2d into the same offset `dst` of every block of the cluster in `mask` (bit r: rank r),
// completing the box's bytes on the barrier at offset `bar` of each.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                                      uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

// OR of `v` over the `Threads` threads (whole warps) that meet at named barrier `Id`.
template <int Id, int Threads>
__device__ __forceinline__ bool named_barrier_or(bool v) {
  uint32_t r;
  asm volatile(
      "{\n"
      ".reg .pred p, q;\n"
      "setp.ne.u32 q, %1, 0;\n"
      "bar.red.or.pred p, %2, %3, q;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(v)), "n"(Id), "n"(Threads)
      : "memory");
  return r != 0;
}

// Hands registers between warpgroups: the producer keeps few, the consumers' accumulators get
// the rest. Every thread of the warpgroup executes it.
template <int Regs>
__device__ __forceinline__ void warpgroup_reg_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void warpgroup_reg_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

#endif

}  // namespace atl::cuda::gemm
