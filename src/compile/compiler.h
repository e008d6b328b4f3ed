#pragma once
// Graph -> Program: passes (drop dropout, fold BatchNorm, fuse epilogues, layout) and the
// memory planner. The result carries the weights the passes produced (folded, reordered).
#include "ir/graph.h"
#include "program/program.h"

namespace atl {

struct CompileOptions {
  bool fold_batchnorm = true;   // BN after conv folded into its weights and bias
  bool fuse_epilogues = true;   // bias, activation and residual add fused into conv/gemm
};

struct CompiledModel {
  Program program;
  WeightStore weights;  // f32/i64 host tensors keyed by Program::weights names, physical layout
};

// The graph must have its weights materialized (init_weights or load_weights).
CompiledModel compile_graph(const Graph& graph, const CompileTarget& target, const CompileOptions& options = {});

}  // namespace atl
