#pragma once
// How Programs are compiled for the CUDA engine, shared by the CUDA backend (which runs them)
// and the simulated GPU (which times them): one definition, so that a timing-only simulator runs
// the engine's own Programs, kernel for kernel, and accepts the profiles `atoll profile --device
// cuda` writes for them (a profile is keyed to its Program's fingerprint).
#include "backends/engine_limits.h"
#include "program/program.h"

namespace atl {

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
