// Graph rewrites that change no result beyond fp32 rounding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "compile/work_graph.h"
#include "ir/op_attrs.h"

namespace atl::compile_detail {

namespace {

bool is_activation_op(OpKind op) {
  return op == OpKind::kRelu || op == OpKind::kRelu6 || op == OpKind::kGelu || op == OpKind::kTanh;
}

Act act_of(OpKind op) {
  switch (op) {
    case OpKind::kRelu: return Act::kRelu;
    case OpKind::kRelu6: return Act::kRelu6;
    case OpKind::kGelu: return Act::kGelu;
    case OpKind::kTanh: return Act::kTanh;
    default: return Act::kNone;
  }
}

// The single live consumer of `value`, if it has exactly one and is not a graph output.
int sole_consumer(const WorkGraph& w, int value) {
  if (w.is_output(value)) return -1;
  std::vector<int> c = w.consumers(value);
  return c.size() == 1 ? c[0] : -1;
}

const Tensor& weight_of(const WorkGraph& w, int value) {
  return w.weights.at(w.values[static_cast<size_t>(value)].name);
}

}  // namespace

void drop_dropout(WorkGraph& w) {
  for (WNode& n : w.nodes) {
    if (n.dead || n.op != OpKind::kDropout) continue;
    const int in = n.in[0];
    ATOLL_CHECK(!(w.is_output(n.out) && w.values[static_cast<size_t>(in)].kind != ValueKind::kActivation),
                kUnsupported, "node '{}': a model output that is only a dropout of an input or weight", n.name);
    n.dead = true;
    w.replace_uses(n.out, in);
  }
  w.erase_dead();
}

void fold_batchnorm(WorkGraph& w, bool fold_into_conv) {
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    WNode& bn = w.nodes[i];
    if (bn.dead || bn.op != OpKind::kBatchNorm) continue;
    const double eps = bn.attrs.get_float("epsilon", 1e-5);
    const auto gamma = weight_of(w, bn.in[1]).as<float>();
    const auto beta = weight_of(w, bn.in[2]).as<float>();
    const auto mean = weight_of(w, bn.in[3]).as<float>();
    const auto var = weight_of(w, bn.in[4]).as<float>();
    const size_t channels = gamma.size();
    std::vector<double> scale(channels), shift(channels);
    for (size_t c = 0; c < channels; ++c) {
      scale[c] = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
      shift[c] = beta[c] - mean[c] * scale[c];
    }

    const int x = bn.in[0];
    const int p = w.producer(x);
    const bool foldable = fold_into_conv && p >= 0 && w.nodes[static_cast<size_t>(p)].op == OpKind::kConv2d &&
                          sole_consumer(w, x) == static_cast<int>(i) && [&] {
                            const Conv2dParams cp = conv2d_params(w.nodes[static_cast<size_t>(p)].attrs);
                            return cp.act == Act::kNone && !cp.has_residual;
                          }();
    if (foldable) {
      WNode& conv = w.nodes[static_cast<size_t>(p)];
      const Conv2dParams cp = conv2d_params(conv.attrs);
      const Tensor& wt = weight_of(w, conv.in[1]);
      Tensor folded = w.compute_values ? wt.clone() : Tensor(wt.dtype(), wt.shape());
      auto fw = folded.as<float>();
      const size_t per_out = fw.size() / channels;
      for (size_t o = 0; o < channels && w.compute_values; ++o) {
        for (size_t k = 0; k < per_out; ++k) fw[o * per_out + k] = static_cast<float>(fw[o * per_out + k] * scale[o]);
      }
      Tensor bias(DType::kF32, Shape{static_cast<int64_t>(channels)});
      auto fb = bias.as<float>();
      for (size_t o = 0; o < channels; ++o) {
        const double b0 = cp.has_bias ? weight_of(w, conv.in[2]).as<float>()[o] : 0.0;
        fb[o] = static_cast<float>(b0 * scale[o] + shift[o]);
      }
      const int new_w = w.add_weight(w.values[static_cast<size_t>(conv.in[1])].name + "+" + bn.name, std::move(folded));
      const int new_b = w.add_weight(bn.name + ".folded_bias", std::move(bias));
      conv.in[1] = new_w;
      if (cp.has_bias) {
        conv.in[2] = new_b;
      } else {
        conv.in.insert(conv.in.begin() + 2, new_b);
        conv.attrs.set("bias", int64_t{1});
      }
      conv.out = bn.out;
      bn.dead = true;
    } else {
      Tensor s(DType::kF32, Shape{static_cast<int64_t>(channels)});
      Tensor t(DType::kF32, Shape{static_cast<int64_t>(channels)});
      for (size_t c = 0; c < channels; ++c) {
        s.as<float>()[c] = static_cast<float>(scale[c]);
        t.as<float>()[c] = static_cast<float>(shift[c]);
      }
      const int sv = w.add_weight(bn.name + ".scale", std::move(s));
      const int tv = w.add_weight(bn.name + ".shift", std::move(t));
      bn.op = OpKind::kScaleShift;
      bn.in = {x, sv, tv};
      bn.attrs = Attrs{{"act", std::string("none")}};
    }
  }
  w.erase_dead();
}

void fuse_residual_add(WorkGraph& w) {
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    WNode& add = w.nodes[i];
    if (add.dead || add.op != OpKind::kAdd || add.attrs.get_string("act", "none") != "none") continue;
    const Shape& out_shape = w.values[static_cast<size_t>(add.out)].shape;
    for (int side = 0; side < 2; ++side) {
      const int main = add.in[static_cast<size_t>(side)];
      const int other = add.in[static_cast<size_t>(1 - side)];
      if (main == other) break;  // x + x: the residual would be the kernel's own output
      if (!(w.values[static_cast<size_t>(other)].shape == out_shape) ||
          !(w.values[static_cast<size_t>(main)].shape == out_shape)) {
        continue;
      }
      const int p = w.producer(main);
      if (p < 0 || sole_consumer(w, main) != static_cast<int>(i)) continue;
      WNode& prod = w.nodes[static_cast<size_t>(p)];
      if (prod.op != OpKind::kConv2d && prod.op != OpKind::kGemm) continue;
      if (prod.attrs.get_string("act", "none") != "none" || prod.attrs.get_int("residual", 0) != 0) continue;
      // The fused kernel runs where the Add ran: by then `other` exists.
      WNode fused = prod;
      fused.in.push_back(other);
      fused.attrs.set("residual", int64_t{1});
      fused.out = add.out;
      prod.dead = true;
      w.nodes[i] = std::move(fused);
      break;
    }
  }
  w.erase_dead();
}

void fuse_activation(WorkGraph& w) {
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    WNode& act = w.nodes[i];
    if (act.dead || !is_activation_op(act.op)) continue;
    const int x = act.in[0];
    const int p = w.producer(x);
    if (p < 0 || sole_consumer(w, x) != static_cast<int>(i)) continue;
    WNode& prod = w.nodes[static_cast<size_t>(p)];
    const bool fusable = prod.op == OpKind::kConv2d || prod.op == OpKind::kGemm || prod.op == OpKind::kScaleShift ||
                         prod.op == OpKind::kAdd;
    if (!fusable || prod.attrs.get_string("act", "none") != "none") continue;
    prod.attrs.set("act", std::string(act_name(act_of(act.op))));
    prod.out = act.out;
    act.dead = true;
  }
  w.erase_dead();
}

namespace {

// A Transpose swapping dims 1 and 2 of a rank-4 tensor: attention's heads-first reorder.
bool is_swap12(const WorkGraph& w, int node) {
  if (node < 0) return false;
  const WNode& t = w.nodes[static_cast<size_t>(node)];
  return t.op == OpKind::kTranspose && t.attrs.get_ints("perm", {}) == std::vector<int64_t>{0, 2, 1, 3};
}

}  // namespace

void fold_head_transposes(WorkGraph& w) {
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    WNode& mm = w.nodes[i];
    if (mm.dead || mm.op != OpKind::kMatMul || mm.in[0] == mm.in[1]) continue;
    if (w.values[static_cast<size_t>(mm.in[0])].shape.rank() != 4) continue;
    for (int side = 0; side < 2; ++side) {
      const int v = mm.in[static_cast<size_t>(side)];
      const int p = w.producer(v);
      const char* attr = side == 0 ? "a_swap12" : "b_swap12";
      if (!is_swap12(w, p) || sole_consumer(w, v) != static_cast<int>(i) || mm.attrs.get_int(attr, 0) != 0) continue;
      WNode& t = w.nodes[static_cast<size_t>(p)];
      mm.in[static_cast<size_t>(side)] = t.in[0];
      mm.attrs.set(attr, int64_t{1});
      t.dead = true;
    }
    const int c = sole_consumer(w, mm.out);
    if (is_swap12(w, c) && mm.attrs.get_int("y_swap12", 0) == 0) {
      WNode& t = w.nodes[static_cast<size_t>(c)];
      mm.out = t.out;
      mm.attrs.set("y_swap12", int64_t{1});
      t.dead = true;
    }
  }
  w.erase_dead();
}

namespace {

// The Softmax node `s` as the middle of an attention chain: its producer and its consumer, or
// {-1, -1}. Scores plain (not y_swap12) and scaled only by alpha; the context MatMul unscaled
// and reading the probabilities as stored.
std::pair<int, int> attention_chain(const WorkGraph& w, int s) {
  const WNode& sm = w.nodes[static_cast<size_t>(s)];
  const WValue& scores_v = w.values[static_cast<size_t>(sm.in[0])];
  if (sm.dead || sm.op != OpKind::kSoftmax || scores_v.shape.rank() != 4 || !is_float(scores_v.dtype)) return {-1, -1};
  if (sm.attrs.get_int("axis", -1) != -1 && sm.attrs.get_int("axis", -1) != 3) return {-1, -1};
  const int p = w.producer(sm.in[0]);
  const int c = sole_consumer(w, sm.out);
  if (p < 0 || c < 0 || sole_consumer(w, sm.in[0]) != s) return {-1, -1};
  const WNode& scores = w.nodes[static_cast<size_t>(p)];
  const WNode& context = w.nodes[static_cast<size_t>(c)];
  if (scores.op != OpKind::kMatMul || context.op != OpKind::kMatMul || context.in[0] != sm.out ||
      context.in[1] == sm.out) {
    return {-1, -1};
  }
  const bool scores_ok = scores.attrs.get_int("trans_b", 0) != 0 && scores.attrs.get_int("y_swap12", 0) == 0;
  const bool context_ok = context.attrs.get_int("trans_b", 0) == 0 && context.attrs.get_int("a_swap12", 0) == 0 &&
                          context.attrs.get_float("alpha", 1.0) == 1.0;
  return scores_ok && context_ok ? std::pair{p, c} : std::pair{-1, -1};
}

bool within_attention_limits(const WorkGraph& w, const WNode& fused, const CompileTarget& t) {
  auto shape = [&](int i) -> const Shape& { return w.values[static_cast<size_t>(fused.in[static_cast<size_t>(i)])].shape; };
  const AttentionShapes s = attention_shapes(fused.attrs, shape(0), shape(1), shape(2));
  if (!s.error.empty()) return false;
  if (t.attention_max_keys > 0 && s.scores.n > t.attention_max_keys) return false;
  for (const int64_t d : {s.scores.k, s.context.n}) {
    if (t.attention_max_head_dim > 0 && d > t.attention_max_head_dim) return false;
    if (d % std::max<int64_t>(t.attention_head_dim_multiple, 1) != 0) return false;
  }
  return true;
}

}  // namespace

void fuse_attention(WorkGraph& w, const CompileTarget& target) {
  for (size_t s = 0; s < w.nodes.size(); ++s) {
    const auto [p, c] = attention_chain(w, static_cast<int>(s));
    if (p < 0) continue;
    WNode& scores = w.nodes[static_cast<size_t>(p)];
    // The fused node takes the context MatMul's place: v may be computed after the scores.
    WNode fused = w.nodes[static_cast<size_t>(c)];
    fused.op = OpKind::kAttention;
    fused.in = {scores.in[0], scores.in[1], fused.in[1]};
    fused.attrs = Attrs{{"scale", scores.attrs.get_float("alpha", 1.0)},
                        {"q_swap12", scores.attrs.get_int("a_swap12", 0)},
                        {"k_swap12", scores.attrs.get_int("b_swap12", 0)},
                        {"v_swap12", fused.attrs.get_int("b_swap12", 0)},
                        {"y_swap12", fused.attrs.get_int("y_swap12", 0)}};
    if (!within_attention_limits(w, fused, target)) continue;
    w.nodes[static_cast<size_t>(c)] = std::move(fused);
    scores.dead = true;
    w.nodes[s].dead = true;
  }
  w.erase_dead();
}

void drop_unused(WorkGraph& w) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (WNode& n : w.nodes) {
      if (n.dead || w.is_output(n.out) || !w.consumers(n.out).empty()) continue;
      n.dead = true;
      changed = true;
    }
  }
  w.erase_dead();
}

void make_views(WorkGraph& w) {
  for (WNode& n : w.nodes) {
    if (n.op != OpKind::kReshape && n.op != OpKind::kFlatten) continue;
    WValue& out = w.values[static_cast<size_t>(n.out)];
    const WValue& in = w.values[static_cast<size_t>(n.in[0])];
    const bool same_order = in.layout == Layout::kRowMajor || (in.shape[2] == 1 && in.shape[3] == 1);
    ATOLL_CHECK(same_order, kInternal, "view '{}' of an NHWC tensor whose bytes are not in logical order", n.name);
    out.alias = n.in[0];
    n.dead = true;
  }
  w.erase_dead();
}

namespace {

// A Gemm the grouping may take: ungrouped, no residual, f32 weights, its result not a graph output.
bool groupable_gemm(const WorkGraph& w, const WNode& n) {
  if (n.dead || n.op != OpKind::kGemm || n.attrs.get_int("groups", 1) != 1 || n.attrs.get_int("residual", 0) != 0) {
    return false;
  }
  for (size_t i = 1; i < n.in.size(); ++i) {
    const WValue& v = w.values[static_cast<size_t>(n.in[i])];
    if (v.kind != ValueKind::kWeight || v.alias >= 0 || v.dtype != DType::kF32) return false;
  }
  return !w.is_output(n.out);
}

bool same_gemm(const WorkGraph& w, const WNode& a, const WNode& b) {
  if (a.in.size() != b.in.size() || a.in[0] != b.in[0] || !(a.attrs == b.attrs)) return false;
  for (size_t i = 1; i < a.in.size(); ++i) {
    if (!(w.values[static_cast<size_t>(a.in[i])].shape == w.values[static_cast<size_t>(b.in[i])].shape)) return false;
  }
  return true;
}

// The parameters of `members` stacked along their first axis, under one new weight.
int stack_weights(WorkGraph& w, const std::vector<int>& members, const std::string& name) {
  const Shape one = w.values[static_cast<size_t>(members[0])].shape;
  std::vector<int64_t> dims = one.dims();
  dims[0] *= static_cast<int64_t>(members.size());
  Tensor stacked(DType::kF32, Shape(dims));
  const size_t bytes = static_cast<size_t>(one.numel()) * sizeof(float);
  for (size_t g = 0; g < members.size() && w.compute_values; ++g) {
    std::memcpy(stacked.raw() + g * bytes, weight_of(w, members[g]).raw(), bytes);
  }
  return w.add_weight(name, std::move(stacked));
}

// "a.b.query+key+value" from "a.b.query", "a.b.key", "a.b.value".
std::string group_name(const std::vector<std::string>& names) {
  const size_t dot = names[0].rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : names[0].substr(0, dot + 1);
  std::string out = names[0];
  for (size_t i = 1; i < names.size(); ++i) {
    const bool shared = !prefix.empty() && names[i].rfind(prefix, 0) == 0;
    out += "+" + (shared ? names[i].substr(prefix.size()) : names[i]);
  }
  return out;
}

}  // namespace

void group_shared_input_gemms(WorkGraph& w, const CompileTarget& target) {
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    if (!groupable_gemm(w, w.nodes[i])) continue;
    // Its slice must keep the arena's alignment and its columns the target's multiple; members
    // share its shapes, so they are checked once, before looking for them.
    const int64_t slice_bytes = w.values[static_cast<size_t>(w.nodes[i].out)].shape.numel() *
                                static_cast<int64_t>(dtype_size(target.act_dtype));
    const int64_t columns = w.values[static_cast<size_t>(w.nodes[i].in[1])].shape[0];
    if (slice_bytes % target.alignment != 0 || columns % target.gemm_group_columns != 0) continue;
    std::vector<size_t> group{i};
    for (size_t j = i + 1; j < w.nodes.size(); ++j) {
      if (groupable_gemm(w, w.nodes[j]) && same_gemm(w, w.nodes[i], w.nodes[j])) group.push_back(j);
    }
    if (group.size() < 2) continue;
    std::vector<std::string> names;
    std::vector<int> outs;
    for (size_t g : group) {
      names.push_back(w.nodes[g].name);
      outs.push_back(w.nodes[g].out);
    }
    const std::string name = group_name(names);
    std::vector<int> in{w.nodes[i].in[0]};
    for (size_t param = 1; param < w.nodes[i].in.size(); ++param) {
      std::vector<int> members;
      for (size_t g : group) members.push_back(w.nodes[g].in[param]);
      in.push_back(stack_weights(w, members, name + (param == 1 ? ".weight" : ".bias")));
    }
    WValue stacked = w.values[static_cast<size_t>(outs[0])];
    stacked.name = name;
    std::vector<int64_t> dims = stacked.shape.dims();
    dims.insert(dims.begin(), static_cast<int64_t>(group.size()));
    stacked.shape = Shape(dims);
    const int stacked_value = w.add_value(std::move(stacked));
    for (size_t g = 0; g < outs.size(); ++g) {
      WValue& view = w.values[static_cast<size_t>(outs[g])];
      view.alias = stacked_value;
      view.alias_offset = static_cast<int64_t>(g) * view.shape.numel();
    }
    WNode& first = w.nodes[i];
    first.name = name;
    first.in = std::move(in);
    first.out = stacked_value;
    first.attrs.set("groups", static_cast<int64_t>(group.size()));
    for (size_t k = 1; k < group.size(); ++k) w.nodes[group[k]].dead = true;
  }
  w.erase_dead();
}

}  // namespace atl::compile_detail
