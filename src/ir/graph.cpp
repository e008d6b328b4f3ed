#include "ir/graph.h"

#include <atomic>
#include <queue>
#include <thread>

#include "core/error.h"
#include "core/rng.h"

namespace atl {

ValueId Graph::new_value(const std::string& name, DType dtype, Shape shape, ValueKind kind) {
  ATOLL_CHECK(!by_name_.count(name), kInvalidGraph, "duplicate value name '{}'", name);
  Value v;
  v.id = static_cast<ValueId>(values_.size());
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.kind = kind;
  by_name_[name] = v.id;
  values_.push_back(std::move(v));
  return values_.back().id;
}

ValueId Graph::add_input(const std::string& name, DType dtype, Shape shape) {
  for (int i = 0; i < shape.rank(); ++i) {
    ATOLL_CHECK(shape[i] > 0, kInvalidGraph, "input '{}' has non-positive dimension in {}", name, shape.str());
  }
  ValueId v = new_value(name, dtype, std::move(shape), ValueKind::kInput);
  inputs_.push_back(v);
  return v;
}

ValueId Graph::add_weight(const std::string& name, Shape shape, WeightInit init, DType dtype) {
  ValueId v = new_value(name, dtype, std::move(shape), ValueKind::kWeight);
  values_[static_cast<size_t>(v)].init = init;
  return v;
}

std::vector<ValueId> Graph::add_node(OpKind op, const std::string& name, std::vector<ValueId> inputs, Attrs attrs,
                                     int num_outputs) {
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  for (ValueId in : n.inputs) {
    ATOLL_CHECK(in >= 0 && in < static_cast<ValueId>(values_.size()), kInvalidGraph,
                "node '{}' ({}): input value {} does not exist", name, op_name(op), in);
  }
  std::vector<InferredType> types = infer_node(*this, n);
  ATOLL_CHECK(static_cast<int>(types.size()) == num_outputs, kInvalidGraph,
              "node '{}' ({}): produces {} outputs, {} requested", name, op_name(op), types.size(), num_outputs);
  for (int i = 0; i < num_outputs; ++i) {
    const std::string out_name = num_outputs == 1 ? name : fmt::format("{}:{}", name, i);
    ValueId v = new_value(out_name, types[static_cast<size_t>(i)].dtype, types[static_cast<size_t>(i)].shape,
                          ValueKind::kActivation);
    values_[static_cast<size_t>(v)].producer = n.id;
    n.outputs.push_back(v);
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Graph::mark_output(ValueId v) {
  ATOLL_CHECK(v >= 0 && v < static_cast<ValueId>(values_.size()), kInvalidGraph, "output value {} does not exist", v);
  outputs_.push_back(v);
}

std::optional<ValueId> Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void Graph::init_weights(uint64_t seed) {
  std::vector<const Value*> todo;
  for (const Value& v : values_) {
    if (v.kind == ValueKind::kWeight) todo.push_back(&v);
  }
  std::vector<Tensor> made(todo.size());
  // Each weight has its own stream keyed by (seed, name), so filling them in parallel gives the
  // same values as filling them in order.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      const Value& v = *todo[i];
      Tensor t(v.dtype, v.shape);
      Rng rng(seed, v.name);
      if (v.dtype == DType::kI64) {
        for (int64_t& x : t.as<int64_t>()) x = static_cast<int64_t>(v.init.a);
      } else {
        for (float& x : t.as<float>()) {
          switch (v.init.kind) {
            case WeightInit::Kind::kUniform: x = rng.uniform(v.init.a, v.init.b); break;
            case WeightInit::Kind::kNormal: x = v.init.a + v.init.b * rng.normal(); break;
            case WeightInit::Kind::kConstant: x = v.init.a; break;
          }
        }
      }
      made[i] = std::move(t);
    }
  };
  const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < todo.size(); ++i) weights_[todo[i]->name] = std::move(made[i]);
}

int Graph::load_weights(const WeightStore& store) {
  int loaded = 0;
  for (const auto& [stored_name, tensor] : store) {
    // Checkpoints of wrapper modules prefix every name ("bert.encoder..."): try without it too.
    std::string name = stored_name;
    auto id = find_value(name);
    if (!id && name.find('.') != std::string::npos) {
      name = name.substr(name.find('.') + 1);
      id = find_value(name);
    }
    if (!id || values_[static_cast<size_t>(*id)].kind != ValueKind::kWeight) continue;
    const Value& v = values_[static_cast<size_t>(*id)];
    ATOLL_CHECK(tensor.shape() == v.shape, kInvalidArgument, "weight '{}': expected shape {}, file has {}", name,
                v.shape.str(), tensor.shape().str());
    weights_[name] = tensor.to(v.dtype).reshaped(v.shape);
    ++loaded;
  }
  return loaded;
}

void Graph::validate() {
  std::vector<NodeId> order = topological_order(*this);
  std::vector<int> producers(values_.size(), 0);
  for (const Node& n : nodes_) {
    for (ValueId o : n.outputs) {
      ATOLL_CHECK(++producers[static_cast<size_t>(o)] == 1, kInvalidGraph, "node '{}': value '{}' has two producers",
                  n.name, values_[static_cast<size_t>(o)].name);
      ATOLL_CHECK(values_[static_cast<size_t>(o)].kind == ValueKind::kActivation, kInvalidGraph,
                  "node '{}' writes input or weight '{}'", n.name, values_[static_cast<size_t>(o)].name);
    }
  }
  for (const Value& v : values_) {
    if (v.kind == ValueKind::kActivation && producers[static_cast<size_t>(v.id)] == 0) {
      bool used = false;
      for (const Node& n : nodes_) {
        for (ValueId i : n.inputs) used |= i == v.id;
      }
      for (ValueId o : outputs_) used |= o == v.id;
      ATOLL_CHECK(!used, kInvalidGraph, "value '{}' is used but never produced", v.name);
    }
  }
  for (NodeId id : order) {
    Node& n = nodes_[static_cast<size_t>(id)];
    std::vector<InferredType> types = infer_node(*this, n);
    ATOLL_CHECK(types.size() == n.outputs.size(), kInvalidGraph, "node '{}' ({}): expected {} outputs, has {}",
                n.name, op_name(n.op), types.size(), n.outputs.size());
    for (size_t i = 0; i < types.size(); ++i) {
      Value& out = values_[static_cast<size_t>(n.outputs[i])];
      out.dtype = types[i].dtype;
      out.shape = types[i].shape;
      out.producer = n.id;
    }
  }
}

int64_t Graph::param_count() const {
  int64_t n = 0;
  for (const Value& v : values_) {
    if (v.kind == ValueKind::kWeight) n += v.shape.numel();
  }
  return n;
}

std::vector<NodeId> topological_order(const Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<int> indegree(nodes.size(), 0);
  std::vector<std::vector<NodeId>> consumers(nodes.size());
  for (const Node& n : nodes) {
    for (ValueId in : n.inputs) {
      NodeId p = g.value(in).producer;
      if (p >= 0) {
        ++indegree[static_cast<size_t>(n.id)];
        consumers[static_cast<size_t>(p)].push_back(n.id);
      }
    }
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (const Node& n : nodes) {
    if (indegree[static_cast<size_t>(n.id)] == 0) ready.push(n.id);
  }
  std::vector<NodeId> order;
  while (!ready.empty()) {
    NodeId n = ready.top();
    ready.pop();
    order.push_back(n);
    for (NodeId c : consumers[static_cast<size_t>(n)]) {
      if (--indegree[static_cast<size_t>(c)] == 0) ready.push(c);
    }
  }
  if (order.size() != nodes.size()) {
    for (const Node& n : nodes) {
      ATOLL_CHECK(indegree[static_cast<size_t>(n.id)] == 0, kInvalidGraph, "node '{}' is part of a cycle", n.name);
    }
  }
  return order;
}

}  // namespace atl
