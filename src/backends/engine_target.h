#pragma once
// How Programs are compiled for the CUDA engine, shared by the CUDA backend (which runs them)
// and the simulated GPU (which times them): one definition, so that a timing-only simulator runs
// the engine's own Programs, kernel for kernel, and accepts the profiles `atoll profile --device
// cuda` writes for them (a profile is keyed to its Program's fingerprint).
#include <cstdint>

#include "program/program.h"

namespace atl {

// Every GEMM tile's N divides this (a grouped Gemm's segments are its multiples).
inline constexpr int64_t kEngineGemmSegmentColumns = 64;
// The fused attention kernel's limits: keys per query row, and the widest head.
inline constexpr int64_t kEngineAttentionMaxKeys = 4096;
inline constexpr int64_t kEngineAttentionMaxHeadDim = 128;

// The switches are CudaBackendOptions' (head_views, gemm_groups, fused_attention), on by default.
inline CompileTarget cuda_engine_target(bool head_views = true, bool gemm_groups = true, bool fused_attention = true) {
  CompileTarget t;
  t.act_dtype = DType::kF16;
  t.alignment = 256;
  t.matmul_head_views = head_views;
  t.gemm_groups = gemm_groups;
  t.gemm_group_columns = kEngineGemmSegmentColumns;
  t.fused_attention = fused_attention;
  t.attention_max_keys = kEngineAttentionMaxKeys;
  t.attention_max_head_dim = kEngineAttentionMaxHeadDim;
  return t;
}

}  // namespace atl
