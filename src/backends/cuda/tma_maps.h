#pragma once
// The TMA GEMM's tensor maps, host side: which GEMMs a map can read (tma_gemm_applies, in
// kernel_params.h), the maps of a plain row-major matrix and of a convolution's im2col walk,
// encoded through the driver and cached per thread, so gemm_sm90_tma.cu holds only kernels and
// their launch.
#include <cuda.h>
#include <cuda_fp16.h>

#include <tuple>

#include "backends/cuda/kernel_params.h"

namespace atl::cuda {

constexpr int kTmaBK = 64;   // K per stage: one 128-byte swizzle row of halves
constexpr int kTmaBM = 128;  // rows of every TMA tile

// A row-major [rows, cols] fp16 matrix with `row_elems` between rows, read in boxes of 64
// columns by `box_rows` rows in the 128-byte swizzle wgmma's descriptors describe.
struct MatrixMapKey {
  const __half* base;
  int rows, cols, row_elems, box_rows;
  auto tie() const { return std::tie(base, rows, cols, row_elems, box_rows); }
};

// The map of `k` (cached: a launch whose operands were seen before reuses it). Throws kCuda when
// the driver refuses it, naming `kernel`.
CUtensorMap matrix_map(const MatrixMapKey& k, const char* kernel);
// The im2col map of convolution `p`'s A (tma_gemm_applies and not tma_reads_plain_a), `pixels`
// output pixels per copy, cached.
CUtensorMap im2col_map(const GemmParams& p, const char* kernel, int pixels = kTmaBM);

}  // namespace atl::cuda
