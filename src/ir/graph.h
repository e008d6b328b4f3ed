#pragma once
// The graph IR: typed values, nodes with attributes, weights held by name.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "ir/attrs.h"
#include "ir/op.h"

namespace atl {

using ValueId = int;
using NodeId = int;

enum class ValueKind { kInput, kWeight, kActivation };

// How a weight gets its deterministic values when no file provides them.
struct WeightInit {
  enum class Kind { kUniform, kNormal, kConstant } kind = Kind::kUniform;
  float a = 0.0f;  // uniform: low; normal: mean; constant: value
  float b = 0.0f;  // uniform: high; normal: stddev
};

struct Value {
  ValueId id = -1;
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  ValueKind kind = ValueKind::kActivation;
  NodeId producer = -1;
  WeightInit init;  // weights only
};

struct Node {
  NodeId id = -1;
  OpKind op = OpKind::kRelu;
  std::string name;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
};

// Weight data by name, always fp32 (or int64 for index tables) on the host. Graph weights,
// a safetensors file and (later) ONNX initializers all feed this one store.
using WeightStore = std::map<std::string, Tensor>;

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  ValueId add_input(const std::string& name, DType dtype, Shape shape);
  ValueId add_weight(const std::string& name, Shape shape, WeightInit init, DType dtype = DType::kF32);
  // Adds a node whose inputs already exist and infers its output types at once, so graphs are
  // built in topological order and a bad node fails where it is added.
  std::vector<ValueId> add_node(OpKind op, const std::string& name, std::vector<ValueId> inputs, Attrs attrs = {},
                                int num_outputs = 1);
  ValueId add(OpKind op, const std::string& name, std::vector<ValueId> inputs, Attrs attrs = {}) {
    return add_node(op, name, std::move(inputs), std::move(attrs), 1)[0];
  }
  void mark_output(ValueId v);

  const Value& value(ValueId v) const { return values_.at(static_cast<size_t>(v)); }
  Value& value(ValueId v) { return values_.at(static_cast<size_t>(v)); }
  const Node& node(NodeId n) const { return nodes_.at(static_cast<size_t>(n)); }
  Node& node(NodeId n) { return nodes_.at(static_cast<size_t>(n)); }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::optional<ValueId> find_value(const std::string& name) const;

  WeightStore& weights() { return weights_; }
  const WeightStore& weights() const { return weights_; }
  // Fills every weight from its WeightInit, keyed by (seed, weight name).
  void init_weights(uint64_t seed);
  // Replaces weights present in `store` whose names (or names without their first component,
  // as wrapper-module checkpoints write them) match; shapes must match. Returns how many.
  int load_weights(const WeightStore& store);

  // Raw node/value editing for compiler passes; call validate() afterwards.
  std::vector<Node>& mutable_nodes() { return nodes_; }
  std::vector<Value>& mutable_values() { return values_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  ValueId new_value(const std::string& name, DType dtype, Shape shape, ValueKind kind);

  // Re-checks structure (every input defined before use, single producer) and re-infers every
  // node's output types in topological order. Throws kInvalidGraph naming the node.
  void validate();

  int64_t param_count() const;

 private:
  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::map<std::string, ValueId> by_name_;
  WeightStore weights_;
};

// Nodes in an order where every producer precedes its consumers (Kahn, stable by node id).
// Throws kInvalidGraph on a cycle.
std::vector<NodeId> topological_order(const Graph& g);

struct InferredType {
  DType dtype;
  Shape shape;
};
// Output types of one node from its input types; throws kInvalidGraph naming the node.
std::vector<InferredType> infer_node(const Graph& g, const Node& n);

}  // namespace atl
