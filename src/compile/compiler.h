#pragma once
// Graph -> Program: passes (drop dropout, fold BatchNorm, fuse epilogues, layout) and the
// memory planner. The result carries the weights the passes produced (folded, reordered).
#include "ir/graph.h"
#include "program/program.h"

namespace atl {

struct CompileOptions {
  bool fold_batchnorm = true;   // BN after conv folded into its weights and bias
  bool fuse_epilogues = true;   // bias, activation and residual add fused into conv/gemm
  // Kernels that may be on the device at once (the scheduler's in-flight cap). A preempted task
  // resumes from a cursor read before the flag was raised, so up to this many kernels may re-run
  // after later ones already wrote: no buffer is reused until this many kernels after its last
  // reader, and re-running never reads clobbered memory.
  int inflight_window = 4;
  // Off for devices that only time kernels: the weights keep their shapes, but no pass computes
  // their values (folded and reordered weights stay zero, and untouched zero pages cost nothing).
  bool compute_weights = true;
};

struct CompiledModel {
  Program program;
  WeightStore weights;  // f32/i64 host tensors keyed by Program::weights names, physical layout
};

// The graph must have its weights materialized (init_weights or load_weights).
CompiledModel compile_graph(const Graph& graph, const CompileTarget& target, const CompileOptions& options = {});

}  // namespace atl
