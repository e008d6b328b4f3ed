#pragma once
// The compiler's mutable copy of a Graph: passes rewrite nodes in place and mark the ones
// they absorb as dead; lowering then emits the live nodes in order.
#include <string>
#include <vector>

#include "ir/graph.h"
#include "program/program.h"

namespace atl::compile_detail {

struct WValue {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  ValueKind kind = ValueKind::kActivation;
  Layout layout = Layout::kRowMajor;
  int alias = -1;  // this value is a view of `alias` (same bytes, another shape)
  int64_t alias_offset = 0;  // elements into `alias` where the view starts
};

struct WNode {
  OpKind op = OpKind::kRelu;
  std::string name;
  std::vector<int> in;
  int out = -1;
  Attrs attrs;
  bool dead = false;
};

struct WorkGraph {
  std::vector<WValue> values;
  std::vector<WNode> nodes;  // execution order
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<std::string> output_names;  // the graph's names, kept while passes swap values
  WeightStore weights;  // by value name; passes add folded/reordered weights here
  bool compute_values = true;  // false: new weights get their shapes only (CompileOptions)

  explicit WorkGraph(const Graph& g);
  int add_value(WValue v);
  int add_weight(const std::string& name, Tensor t);
  int producer(int value) const;             // live node index or -1
  std::vector<int> consumers(int value) const;  // live node indices reading it
  bool is_output(int value) const;
  void replace_uses(int from, int to);  // in live nodes and graph outputs
  int root(int value) const;            // follows view aliases
  int64_t view_offset(int value) const;  // elements from root(value) to where the view starts
  void erase_dead();
};

// Passes, in the order compile_graph runs them.
void drop_dropout(WorkGraph& w);
void fold_batchnorm(WorkGraph& w, bool fold_into_conv);  // unfoldable BNs become ScaleShift
void fuse_residual_add(WorkGraph& w);
void fuse_activation(WorkGraph& w);
// Heads-first transposes into the MatMuls that read or write them (CompileTarget::matmul_head_views).
void fold_head_transposes(WorkGraph& w);
// MatMul(q, k^T) -> Softmax(last axis) -> MatMul(., v) chains whose intermediates nothing else
// reads become one Attention node (CompileTarget::fused_attention, within its limits).
void fuse_attention(WorkGraph& w, const CompileTarget& target);
void assign_layouts(WorkGraph& w);  // NHWC for convolution chains, casts where layouts meet
void make_views(WorkGraph& w);      // Reshape/Flatten become aliases, not kernels
// Gemms reading one input with equal attributes and weight shapes become one grouped Gemm whose
// output slices are views (CompileTarget::gemm_groups), where each slice keeps the target's
// alignment.
void group_shared_input_gemms(WorkGraph& w, const CompileTarget& target);
void drop_unused(WorkGraph& w);     // nodes whose results nobody reads

Program lower(const WorkGraph& w, const std::string& model, int64_t batch, const CompileTarget& target,
              int inflight_window, WeightStore& program_weights);

}  // namespace atl::compile_detail
