#pragma once
// Exporters without a Gelu op (opsets before 20) write exact GELU as x * 0.5 * (1 + erf(x / sqrt 2)).
// The importer folds that pattern back into one Gelu node, which backends run (and fuse into
// GEMM epilogues), and drops the nodes it replaced.
#include "ir/graph.h"

namespace atl::onnx_detail {

// Returns how many patterns were fused.
int fuse_exported_gelu(Graph& g);

}  // namespace atl::onnx_detail
