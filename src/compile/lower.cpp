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

// One lowering: the Program being built and the maps from work-graph values to its bindings.
class Lowering {
 public:
  Lowering(const WorkGraph& w, const CompileTarget& target, WeightStore& program_weights)
      : w_(w), target_(target), program_weights_(program_weights) {}

  Program run(const std::string& model, int64_t batch, int inflight_window) {
    p_.model = model;
    p_.batch = batch;
    p_.act_dtype = target_.act_dtype;
    p_.alignment = target_.alignment;
    p_.inflight_window = inflight_window;
    declare_inputs_and_outputs();
    plan_buffers(inflight_window);
    for (const WNode& n : w_.nodes) {
      Kernel k;
      k.name = n.name;
      k.op = n.op;
      k.attrs = n.attrs;
      for (int in : n.in) k.inputs.push_back(bind(in));
      k.outputs.push_back(bind(n.out));
      k.flops = kernel_flops(n, w_);
      for (const auto& b : k.inputs) k.bytes_moved += static_cast<double>(b.bytes);
      for (const auto& b : k.outputs) k.bytes_moved += static_cast<double>(b.bytes);
      p_.kernels.push_back(std::move(k));
    }
    return std::move(p_);
  }

 private:
  const WValue& value(int v) const { return w_.values[static_cast<size_t>(v)]; }
  DType storage_dtype(const WValue& v) const { return is_float(v.dtype) ? target_.act_dtype : v.dtype; }

  void declare_inputs_and_outputs() {
    for (size_t i = 0; i < w_.inputs.size(); ++i) {
      const WValue& v = value(w_.inputs[i]);
      input_index_[w_.inputs[i]] = static_cast<int>(i);
      p_.inputs.push_back({v.name, storage_dtype(v), v.shape, v.layout});
    }
    for (size_t i = 0; i < w_.outputs.size(); ++i) {
      const int r = w_.root(w_.outputs[i]);
      const WValue& v = value(w_.outputs[i]);
      ATOLL_CHECK(value(r).kind == ValueKind::kActivation, kUnsupported,
                  "model output '{}' is an input or weight, not computed", w_.output_names[i]);
      ATOLL_CHECK(!output_index_.count(r), kUnsupported, "model outputs '{}' and another share storage",
                  w_.output_names[i]);
      output_index_[r] = static_cast<int>(i);
      p_.outputs.push_back({w_.output_names[i], storage_dtype(v), v.shape, v.layout});
    }
  }

  // Lifetimes of arena buffers (roots that are neither inputs, weights nor outputs), placed by
  // the planner.
  void plan_buffers(int inflight_window) {
    std::vector<BufferRequest> requests;
    for (size_t k = 0; k < w_.nodes.size(); ++k) {
      const WNode& n = w_.nodes[k];
      const int kk = static_cast<int>(k);
      for (int in : n.in) {
        if (auto it = buffer_of_.find(w_.root(in)); it != buffer_of_.end()) {
          requests[static_cast<size_t>(it->second)].last = kk;
        }
      }
      const int r = w_.root(n.out);
      ATOLL_CHECK(r == n.out, kInternal, "kernel '{}' writes a view", n.name);
      if (value(r).kind != ValueKind::kActivation || output_index_.count(r)) continue;
      ATOLL_CHECK(!buffer_of_.count(r), kInternal, "value '{}' written twice", value(r).name);
      buffer_of_[r] = static_cast<int>(requests.size());
      requests.push_back({value(r).shape.numel() * static_cast<int64_t>(dtype_size(storage_dtype(value(r)))), kk, kk});
    }
    // Kernels up to inflight_window - 1 after a buffer's last reader may be re-run after a
    // preemption together with that reader: keep the buffer until they are past.
    for (BufferRequest& r : requests) r.last += inflight_window - 1;
    plan_ = plan_arena(requests, target_.alignment);
    check_arena_plan(requests, plan_);
    p_.arena_bytes = plan_.arena_bytes;
    p_.naive_activation_bytes = plan_.naive_bytes;
  }

  Binding bind(int v) {
    const int r = w_.root(v);
    const WValue& root = value(r);
    Binding b;
    b.dtype = root.kind == ValueKind::kWeight ? root.dtype : storage_dtype(value(v));
    b.shape = value(v).shape;
    b.layout = value(v).layout;
    b.bytes = value(v).shape.numel() * static_cast<int64_t>(dtype_size(b.dtype));
    b.offset = w_.view_offset(v) * static_cast<int64_t>(dtype_size(b.dtype));
    if (root.kind == ValueKind::kWeight) {
      b.kind = Binding::Kind::kWeight;
      auto it = weight_index_.find(r);
      if (it == weight_index_.end()) {
        it = weight_index_.emplace(r, static_cast<int>(p_.weights.size())).first;
        p_.weights.push_back({root.name, root.dtype, root.shape, root.layout});
        program_weights_[root.name] = w_.weights.at(root.name);
      }
      b.index = it->second;
    } else if (root.kind == ValueKind::kInput) {
      b.kind = Binding::Kind::kInput;
      b.index = input_index_.at(r);
    } else if (auto it = output_index_.find(r); it != output_index_.end()) {
      b.kind = Binding::Kind::kOutput;
      b.index = it->second;
    } else {
      b.kind = Binding::Kind::kArena;
      b.buffer = buffer_of_.at(r);
      b.offset += plan_.offsets[static_cast<size_t>(b.buffer)];
    }
    return b;
  }

  const WorkGraph& w_;
  const CompileTarget& target_;
  WeightStore& program_weights_;
  Program p_;
  std::map<int, int> input_index_, output_index_, weight_index_;
  std::map<int, int> buffer_of_;  // root value -> buffer request index
  ArenaPlan plan_;
};

}  // namespace

Program lower(const WorkGraph& w, const std::string& model, int64_t batch, const CompileTarget& target,
              int inflight_window, WeightStore& program_weights) {
  return Lowering(w, target, program_weights).run(model, batch, inflight_window);
}

}  // namespace atl::compile_detail
