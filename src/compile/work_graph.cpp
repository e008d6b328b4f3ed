#include "compile/work_graph.h"

#include <algorithm>

#include "core/error.h"

namespace atl::compile_detail {

WorkGraph::WorkGraph(const Graph& g) {
  for (const Value& v : g.values()) {
    WValue w;
    w.name = v.name;
    w.dtype = v.dtype;
    w.shape = v.shape;
    w.kind = v.kind;
    values.push_back(std::move(w));
    if (v.kind == ValueKind::kWeight) {
      auto it = g.weights().find(v.name);
      ATOLL_CHECK(it != g.weights().end(), kInvalidArgument,
                  "weight '{}' has no data: initialize or load the model's weights before compiling", v.name);
      weights[v.name] = it->second;
    }
  }
  for (NodeId id : topological_order(g)) {
    const Node& n = g.node(id);
    ATOLL_CHECK(n.outputs.size() == 1, kUnsupported, "node '{}' has {} outputs; the compiler handles one", n.name,
                n.outputs.size());
    nodes.push_back(WNode{n.op, n.name, n.inputs, n.outputs[0], n.attrs, false});
  }
  inputs = g.inputs();
  outputs = g.outputs();
  for (ValueId o : outputs) output_names.push_back(g.value(o).name);
}

int WorkGraph::add_value(WValue v) {
  values.push_back(std::move(v));
  return static_cast<int>(values.size()) - 1;
}

int WorkGraph::add_weight(const std::string& name, Tensor t) {
  ATOLL_CHECK(!weights.count(name), kInternal, "weight '{}' created twice", name);
  WValue v;
  v.name = name;
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.kind = ValueKind::kWeight;
  weights[name] = std::move(t);
  return add_value(std::move(v));
}

int WorkGraph::producer(int value) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i].dead && nodes[i].out == value) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> WorkGraph::consumers(int value) const {
  std::vector<int> c;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].dead) continue;
    if (std::find(nodes[i].in.begin(), nodes[i].in.end(), value) != nodes[i].in.end()) c.push_back(static_cast<int>(i));
  }
  return c;
}

bool WorkGraph::is_output(int value) const { return std::find(outputs.begin(), outputs.end(), value) != outputs.end(); }

void WorkGraph::replace_uses(int from, int to) {
  for (WNode& n : nodes) {
    if (n.dead) continue;
    std::replace(n.in.begin(), n.in.end(), from, to);
  }
  std::replace(outputs.begin(), outputs.end(), from, to);
}

int64_t WorkGraph::view_offset(int value) const {
  int64_t elems = 0;
  for (; values[static_cast<size_t>(value)].alias >= 0; value = values[static_cast<size_t>(value)].alias) {
    elems += values[static_cast<size_t>(value)].alias_offset;
  }
  return elems;
}

int WorkGraph::root(int value) const {
  while (values[static_cast<size_t>(value)].alias >= 0) value = values[static_cast<size_t>(value)].alias;
  return value;
}

void WorkGraph::erase_dead() {
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [](const WNode& n) { return n.dead; }), nodes.end());
}

}  // namespace atl::compile_detail
