#pragma once
// The CUDA engine's kernel limits that shape how Programs are compiled for it: one definition for
// the kernels (backends/cuda/kernel_params.h) and for the compile target the simulator shares
// (engine_target.h). Plain constants, so nvcc's units include them without the Program headers.
#include <cstdint>

namespace atl {

// Every GEMM tile's N divides this (a grouped Gemm's segments are its multiples).
inline constexpr int64_t kEngineGemmSegmentColumns = 64;
// The fused attention kernel's limits: keys per query row, and the widest head.
inline constexpr int64_t kEngineAttentionMaxKeys = 4096;
inline constexpr int64_t kEngineAttentionMaxHeadDim = 128;

}  // namespace atl
