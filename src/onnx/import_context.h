#pragma once
// What the ONNX op importers share: the graph under construction, every ONNX value either as a
// host constant (folded at import) or as an IR value, and the node being converted.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "onnx/proto_tensor.h"

namespace atl::onnx_detail {

class ImportContext {
 public:
  ImportContext(Graph& graph, std::filesystem::path model_dir, int64_t opset)
      : graph_(graph), model_dir_(std::move(model_dir)), opset_(opset) {}

  Graph& graph() { return graph_; }
  int64_t opset() const { return opset_; }
  const std::filesystem::path& model_dir() const { return model_dir_; }

  // --- the node being converted -----------------------------------------------------------------
  void begin_node(const ::onnx::NodeProto& node) { node_ = &node; }
  const ::onnx::NodeProto& node() const { return *node_; }
  int num_inputs() const { return node_->input_size(); }
  // Optional inputs may be absent or named "".
  bool has_input(int i) const { return i < node_->input_size() && !node_->input(i).empty(); }
  bool is_const(int i) const;
  const Tensor& constant(int i) const;  // throws kUnsupported unless the input is a constant
  // The IR value of input i; a constant becomes a weight named after it (once).
  ValueId value(int i);
  Shape shape(int i) const;
  DType dtype(int i) const;
  // Integers of a constant input (axes, shapes, pads), or `def` when the input is absent.
  std::vector<int64_t> const_ints(int i, std::vector<int64_t> def = {}) const;

  // What the node's helper values and computed constants are named after: its first output, or
  // its own name when it has none.
  const std::string& output_base() const;
  void set_output(int i, ValueId v);
  void set_output_const(int i, Tensor t);
  // True when output i exists and some later node or the graph reads it.
  bool output_used(int i) const;

  // Adds an IR node named after the ONNX node's first output (plus `suffix` for helper nodes).
  ValueId add(OpKind op, std::vector<ValueId> inputs, Attrs attrs = {}, const std::string& suffix = "");
  // A new weight holding `t`, named after the node's first output plus `suffix`.
  ValueId add_weight(const std::string& suffix, Tensor t);

  // --- values by ONNX name ----------------------------------------------------------------------
  void define_value(const std::string& name, ValueId v) { values_[name] = v; }
  // A constant the model holds (an initializer, a constant input): it raises the budget of
  // computed constants below.
  void define_const(const std::string& name, Tensor t);
  bool knows(const std::string& name) const { return values_.count(name) || constants_.count(name); }
  const Tensor* find_const(const std::string& name) const;
  ValueId value_of(const std::string& name);
  void set_used(std::map<std::string, int> uses) { uses_ = std::move(uses); }

  // Constants and weights the importer computes (folded nodes, ConstantOfShape, transposed or
  // negated weights, Expand's zeros, default LayerNorm parameters) count against one budget: 64 MiB
  // plus four times the bytes of the constants the model holds. A small file cannot then make the
  // import allocate without bound (fuzz_onnx: 473 bytes whose folded Expand took 320 MiB, then a
  // copy per use), while a model's own constants can still be reshaped, transposed or cast a few
  // times over. account_computed throws kUnsupported, naming `what`, past the budget; a
  // computation whose size the file does not bound checks it first (check_room, computed_room).
  void account_computed(int64_t bytes, const std::string& what);
  void check_room(int64_t bytes, const std::string& what) const;
  int64_t computed_room() const;

 private:
  const std::string& input_name(int i) const;
  std::string unique_name(const std::string& base) const;

  Graph& graph_;
  std::filesystem::path model_dir_;
  int64_t opset_;
  const ::onnx::NodeProto* node_ = nullptr;
  std::map<std::string, Tensor> constants_;
  std::map<std::string, ValueId> values_;
  std::map<std::string, ValueId> weights_of_constants_;
  std::map<std::string, int> uses_;  // readers of each ONNX value (nodes and graph outputs)
  int64_t held_bytes_ = 0;      // bytes of the constants the model holds
  int64_t computed_bytes_ = 0;  // bytes of the constants computed so far
};

using OpImporter = void (*)(ImportContext& ctx, const NodeAttrs& attrs);
// Every ONNX op this importer maps onto the IR, by op type.
const std::map<std::string, OpImporter>& op_importers();
void register_math_importers(std::map<std::string, OpImporter>& table);
void register_nn_importers(std::map<std::string, OpImporter>& table);
void register_shape_importers(std::map<std::string, OpImporter>& table);

// Evaluates a node whose inputs are all constants on the host; false when the op has no host
// evaluation (it then becomes IR nodes over weights).
bool fold_constant_node(ImportContext& ctx, const NodeAttrs& attrs);

// --- shape rules shared by folding and IR lowering (throw kUnsupported naming what is wrong) ---

int normalize_axis(int64_t axis, int rank);
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
std::vector<int64_t> reshape_dims(const Shape& in, const std::vector<int64_t>& target, bool allow_zero);
std::vector<int64_t> squeeze_dims(const Shape& in, const std::vector<int64_t>& axes);
std::vector<int64_t> unsqueeze_dims(const Shape& in, const std::vector<int64_t>& axes);
std::vector<int64_t> flatten_dims(const Shape& in, int64_t axis);

// One axis of a Slice with ONNX's clamping applied: elements start, start + step, ... (count of them).
struct SliceAxis {
  int axis = 0;
  int64_t start = 0, step = 1, count = 0;
};
std::vector<SliceAxis> slice_axes(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                                  std::vector<int64_t> axes, std::vector<int64_t> steps);

}  // namespace atl::onnx_detail
