#include "compile/compiler.h"

#include "compile/work_graph.h"
#include "core/error.h"

namespace atl {

CompiledModel compile_graph(const Graph& graph, const CompileTarget& target, const CompileOptions& options) {
  using namespace compile_detail;
  ATOLL_CHECK(target.act_dtype == DType::kF32 || target.act_dtype == DType::kF16, kInvalidArgument,
              "activations must be stored as f32 or f16, not {}", dtype_name(target.act_dtype));
  WorkGraph w(graph);
  w.compute_values = options.compute_weights;
  drop_dropout(w);
  fold_batchnorm(w, options.fold_batchnorm);
  if (options.fuse_epilogues) {
    fuse_residual_add(w);
    fuse_activation(w);
  }
  if (target.matmul_head_views) fold_head_transposes(w);
  if (target.fused_attention) fuse_attention(w, target);
  drop_unused(w);
  assign_layouts(w);
  make_views(w);
  if (target.gemm_groups) group_shared_input_gemms(w, target);

  int64_t batch = 1;
  if (!graph.inputs().empty() && graph.value(graph.inputs()[0]).shape.rank() > 0) {
    batch = graph.value(graph.inputs()[0]).shape[0];
  }
  CompiledModel out;
  ATOLL_CHECK(options.inflight_window >= 1, kInvalidArgument, "inflight_window must be at least 1, is {}",
              options.inflight_window);
  out.program = lower(w, graph.name(), batch, target, options.inflight_window, out.weights);
  out.program.fingerprint = out.program.compute_fingerprint();
  verify_program(out.program);
  return out;
}

}  // namespace atl
