// Lowering: live nodes become kernels, values become bindings, and the planner places every
// intermediate buffer in the arena.
#include <map>

#include "compile/planner.h"
#include "compile/work_graph.h"
#include "core/error.h"
#include "ir/op_attrs.h"

namespace atl::compile_detail {

namespace {

double kernel_flops(const WNode& n, const WorkGraph& w) {
  auto shape = [&](int v) -> const Shape& { return w.values[static_cast<size_t>(v)].shape; };
  const Shape& out = shape(n.out);
  switch (n.op) {
    case OpKind::kConv2d: {
      const Shape& wt = shape(n.in[1]);
      return 2.0 * static_cast<double>(out.numel()) * static_cast<double>(wt[1] * wt[2] * wt[3]);
    }
    case OpKind::kGemm: return 2.0 * static_cast<double>(out.numel()) * static_cast<double>(shape(n.in[1])[1]);
    case OpKind::kMatMul: {
      const Shape& a = shape(n.in[0]);
      return 2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.dim(-1));
    }
    case OpKind::kAttention: {
      const AttentionShapes s = attention_shapes(n.attrs, shape(n.in[0]), shape(n.in[1]), shape(n.in[2]));
      const double scores = static_cast<double>(s.scores.batch * s.scores.m * s.scores.n);
      return scores * (2.0 * static_cast<double>(s.scores.k + s.context.n) + 5.0);
    }
    case OpKind::kMaxPool:
    case OpKind::kAvgPool: {
      const PoolParams p = pool_params(n.attrs);
      return static_cast<double>(out.numel() * p.k_h * p.k_w);
    }
    case OpKind::kGlobalAvgPool: return static_cast<double>(shape(n.in[0]).numel());
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm: return 5.0 * static_cast<double>(out.numel());
    case OpKind::kGelu:
    case OpKind::kTanh: return 8.0 * static_cast<double>(out.numel());
    default: return static_cast<double>(out.numel());
  }
}

}  // namespace

Program lower(const WorkGraph& w, const std::string& model, int64_t batch, const CompileTarget& target,
              int inflight_window, WeightStore& program_weights) {
  Program p;
  p.model = model;
  p.batch = batch;
  p.act_dtype = target.act_dtype;
  p.alignment = target.alignment;
  p.inflight_window = inflight_window;

  auto storage_dtype = [&](const WValue& v) { return is_float(v.dtype) ? target.act_dtype : v.dtype; };

  std::map<int, int> input_index, output_index, weight_index;
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    const WValue& v = w.values[static_cast<size_t>(w.inputs[i])];
    input_index[w.inputs[i]] = static_cast<int>(i);
    p.inputs.push_back({v.name, storage_dtype(v), v.shape, v.layout});
  }
  for (size_t i = 0; i < w.outputs.size(); ++i) {
    const int r = w.root(w.outputs[i]);
    const WValue& v = w.values[static_cast<size_t>(w.outputs[i])];
    ATOLL_CHECK(w.values[static_cast<size_t>(r)].kind == ValueKind::kActivation, kUnsupported,
                "model output '{}' is an input or weight, not computed", w.output_names[i]);
    ATOLL_CHECK(!output_index.count(r), kUnsupported, "model outputs '{}' and another share storage",
                w.output_names[i]);
    output_index[r] = static_cast<int>(i);
    p.outputs.push_back({w.output_names[i], storage_dtype(v), v.shape, v.layout});
  }

  // Lifetimes of arena buffers (roots that are neither inputs, weights nor outputs).
  std::map<int, int> buffer_of;  // root value -> request index
  std::vector<BufferRequest> requests;
  std::vector<int> request_root;
  for (size_t k = 0; k < w.nodes.size(); ++k) {
    const WNode& n = w.nodes[k];
    const int kk = static_cast<int>(k);
    for (int in : n.in) {
      const int r = w.root(in);
      if (auto it = buffer_of.find(r); it != buffer_of.end()) requests[static_cast<size_t>(it->second)].last = kk;
    }
    const int r = w.root(n.out);
    ATOLL_CHECK(r == n.out, kInternal, "kernel '{}' writes a view", n.name);
    if (w.values[static_cast<size_t>(r)].kind != ValueKind::kActivation || output_index.count(r)) continue;
    ATOLL_CHECK(!buffer_of.count(r), kInternal, "value '{}' written twice", w.values[static_cast<size_t>(r)].name);
    const WValue& v = w.values[static_cast<size_t>(r)];
    buffer_of[r] = static_cast<int>(requests.size());
    requests.push_back({v.shape.numel() * static_cast<int64_t>(dtype_size(storage_dtype(v))), kk, kk});
    request_root.push_back(r);
  }
  // Kernels up to inflight_window - 1 after a buffer's last reader may be re-run after a
  // preemption together with that reader: keep the buffer until they are past.
  for (BufferRequest& r : requests) r.last += inflight_window - 1;
  const ArenaPlan plan = plan_arena(requests, target.alignment);
  check_arena_plan(requests, plan);
  p.arena_bytes = plan.arena_bytes;
  p.naive_activation_bytes = plan.naive_bytes;

  auto bind = [&](int value) {
    const WValue& v = w.values[static_cast<size_t>(value)];
    const int r = w.root(value);
    const WValue& root = w.values[static_cast<size_t>(r)];
    Binding b;
    b.dtype = root.kind == ValueKind::kWeight ? root.dtype : storage_dtype(v);
    b.shape = v.shape;
    b.layout = v.layout;
    b.bytes = v.shape.numel() * static_cast<int64_t>(dtype_size(b.dtype));
    b.offset = w.view_offset(value) * static_cast<int64_t>(dtype_size(b.dtype));
    if (root.kind == ValueKind::kWeight) {
      b.kind = Binding::Kind::kWeight;
      auto it = weight_index.find(r);
      if (it == weight_index.end()) {
        it = weight_index.emplace(r, static_cast<int>(p.weights.size())).first;
        p.weights.push_back({root.name, root.dtype, root.shape, root.layout});
        program_weights[root.name] = w.weights.at(root.name);
      }
      b.index = it->second;
    } else if (root.kind == ValueKind::kInput) {
      b.kind = Binding::Kind::kInput;
      b.index = input_index.at(r);
    } else if (auto it = output_index.find(r); it != output_index.end()) {
      b.kind = Binding::Kind::kOutput;
      b.index = it->second;
    } else {
      b.kind = Binding::Kind::kArena;
      b.buffer = buffer_of.at(r);
      b.offset += plan.offsets[static_cast<size_t>(b.buffer)];
    }
    return b;
  };

  for (const WNode& n : w.nodes) {
    Kernel k;
    k.name = n.name;
    k.op = n.op;
    k.attrs = n.attrs;
    for (int in : n.in) k.inputs.push_back(bind(in));
    k.outputs.push_back(bind(n.out));
    k.flops = kernel_flops(n, w);
    for (const auto& b : k.inputs) k.bytes_moved += static_cast<double>(b.bytes);
    for (const auto& b : k.outputs) k.bytes_moved += static_cast<double>(b.bytes);
    p.kernels.push_back(std::move(k));
  }
  return p;
}

}  // namespace atl::compile_detail
