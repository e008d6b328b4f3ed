#include "onnx/gelu_fusion.h"

#include <cmath>
#include <optional>

namespace atl::onnx_detail {

namespace {

class Consumers {
 public:
  explicit Consumers(const Graph& g) : readers_(g.values().size()) {
    for (const Node& n : g.nodes()) {
      for (ValueId v : n.inputs) readers_[static_cast<size_t>(v)].push_back(n.id);
    }
    for (ValueId v : g.outputs()) readers_[static_cast<size_t>(v)].push_back(-1);
  }
  // The one node reading `v`, if exactly one node (and no graph output) does.
  std::optional<NodeId> sole(ValueId v) const {
    const auto& r = readers_[static_cast<size_t>(v)];
    if (r.size() != 1 || r[0] < 0) return std::nullopt;
    return r[0];
  }
  bool unread(ValueId v) const { return readers_[static_cast<size_t>(v)].empty(); }

 private:
  std::vector<std::vector<NodeId>> readers_;
};

bool is_scalar_weight(const Graph& g, ValueId v, double want) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::kWeight || val.shape.numel() != 1 || val.dtype != DType::kF32) return false;
  auto it = g.weights().find(val.name);
  return it != g.weights().end() && std::abs(it->second.as<float>()[0] - want) < 1e-4 * std::abs(want);
}

// For a two-input node with a scalar weight `want` on one side: the other input.
std::optional<ValueId> other_than_scalar(const Graph& g, const Node& n, double want) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (is_scalar_weight(g, n.inputs[1], want)) return n.inputs[0];
  if (is_scalar_weight(g, n.inputs[0], want)) return n.inputs[1];
  return std::nullopt;
}

// The node computing GELU's final product from erf node `e`, with x; nullopt when it is no GELU.
std::optional<std::pair<NodeId, ValueId>> match(const Graph& g, const Consumers& c, const Node& e) {
  const NodeId scale_id = g.value(e.inputs[0]).producer;
  if (scale_id < 0 || !c.sole(e.inputs[0])) return std::nullopt;
  const Node& scale = g.node(scale_id);  // x * (1 / sqrt 2), as the importer writes x / sqrt 2
  if (scale.op != OpKind::kMul) return std::nullopt;
  const auto x = other_than_scalar(g, scale, 0.70710678118654752);
  const auto add_id = c.sole(e.outputs[0]);
  if (!x || !add_id || g.node(*add_id).op != OpKind::kAdd || !other_than_scalar(g, g.node(*add_id), 1.0)) {
    return std::nullopt;
  }
  const auto prod_id = c.sole(g.node(*add_id).outputs[0]);
  if (!prod_id || g.node(*prod_id).op != OpKind::kMul) return std::nullopt;
  const Node& prod = g.node(*prod_id);
  const ValueId factor = prod.inputs[0] == g.node(*add_id).outputs[0] ? prod.inputs[1] : prod.inputs[0];
  if (factor == *x) {  // (x * (1 + erf)) * 0.5
    const auto half_id = c.sole(prod.outputs[0]);
    if (!half_id || g.node(*half_id).op != OpKind::kMul || !other_than_scalar(g, g.node(*half_id), 0.5)) {
      return std::nullopt;
    }
    return std::make_pair(*half_id, *x);
  }
  const NodeId half_id = g.value(factor).producer;  // (x * 0.5) * (1 + erf)
  if (half_id < 0 || !c.sole(factor) || g.node(half_id).op != OpKind::kMul) return std::nullopt;
  if (other_than_scalar(g, g.node(half_id), 0.5) != x) return std::nullopt;
  return std::make_pair(*prod_id, *x);
}

// Removes nodes whose outputs nothing reads, renumbering the rest (values keep their ids).
void prune_unread_nodes(Graph& g) {
  for (bool changed = true; changed;) {
    changed = false;
    const Consumers c(g);
    auto& nodes = g.mutable_nodes();
    std::vector<Node> kept;
    for (Node& n : nodes) {
      bool read = false;
      for (ValueId o : n.outputs) read |= !c.unread(o);
      if (read) {
        kept.push_back(std::move(n));
      } else {
        changed = true;
      }
    }
    nodes = std::move(kept);
    for (size_t i = 0; i < nodes.size(); ++i) {
      nodes[i].id = static_cast<NodeId>(i);
      for (ValueId o : nodes[i].outputs) g.mutable_values()[static_cast<size_t>(o)].producer = nodes[i].id;
    }
  }
}

}  // namespace

int fuse_exported_gelu(Graph& g) {
  int fused = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.node(static_cast<NodeId>(i)).op != OpKind::kErf) continue;
    const Consumers c(g);
    const auto m = match(g, c, g.node(static_cast<NodeId>(i)));
    if (!m) continue;
    Node& out = g.node(m->first);
    out.op = OpKind::kGelu;
    out.inputs = {m->second};
    out.attrs = Attrs{};
    ++fused;
  }
  if (fused > 0) prune_unread_nodes(g);
  return fused;
}

}  // namespace atl::onnx_detail
