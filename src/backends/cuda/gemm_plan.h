#pragma once
// Tile and split-K choice for the tensor-core GEMM: a small analytic cost model over the
// candidates. Batch-1 layers have few output tiles, so splitting K is what fills 132 SMs.
#include <cstddef>
#include <vector>

#include "backends/cuda/launch.h"

namespace atl::cuda {

struct GemmShape {
  int M = 0, N = 0, K = 0, batch = 1;
  bool vec = true, b_kn = false;
  bool wgmma = false;  // the device and the build run the Hopper wgmma kernels
  bool tma = false;    // and the TMA tiles read A (tma_gemm_applies)
  bool pingpong = false;  // and the ping-pong TMA tile is offered (CudaBackendOptions::pingpong)
  bool dual_tile = false;  // and the two-blocks-per-SM TMA tile (CudaBackendOptions::dual_tile)
  bool cluster_tile = false;  // and the two-block cluster tile (CudaBackendOptions::cluster_tile)
  int n_segment = 0;   // GemmParams::n_segment: only tiles whose N divides it
  bool gemv = false;   // the GEMV path serves it (gemv_applies)
};

// Every (tile, splits) the kernel variants support for this shape.
std::vector<GemmChoice> candidate_choices(const GemmShape& s);
// Modelled time in microseconds; used to rank candidates, not as a prediction to report.
double estimate_gemm_us(const GemmShape& s, const GemmChoice& c, int sm_count);
GemmChoice choose_gemm(const GemmShape& s, int sm_count);
size_t split_workspace_bytes(const GemmShape& s, const GemmChoice& c);

}  // namespace atl::cuda
