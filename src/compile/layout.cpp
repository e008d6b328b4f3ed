// Layout choice: convolution chains run NHWC; everything else is row-major. Casts are inserted
// where the two meet, once per value.
#include <map>

#include "compile/work_graph.h"
#include "core/error.h"

namespace atl::compile_detail {

namespace {

bool needs_nhwc(const WNode& n, const WorkGraph& w) {
  switch (n.op) {
    case OpKind::kConv2d:
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool: return true;
    case OpKind::kScaleShift: return w.values[static_cast<size_t>(n.in[0])].shape.rank() == 4;
    default: return false;
  }
}

// Ops that work in whatever layout their rank-4 inputs share.
bool follows_input(OpKind op) {
  return is_unary_elementwise(op) || is_binary_elementwise(op) || op == OpKind::kConcat;
}

bool is_view(OpKind op) { return op == OpKind::kReshape || op == OpKind::kFlatten; }

// Reorders a conv weight OIHW -> [O, kh, kw, I]; the tensor keeps its logical shape.
Tensor to_ohwi(const Tensor& t, bool compute_values) {
  const Shape& s = t.shape();
  Tensor out(DType::kF32, s);
  if (!compute_values) return out;
  auto src = t.as<float>();
  auto dst = out.as<float>();
  const int64_t O = s[0], I = s[1], H = s[2], W = s[3];
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t x = 0; x < W; ++x) dst[((o * H + h) * W + x) * I + i] = src[((o * I + i) * H + h) * W + x];
  return out;
}

}  // namespace

void assign_layouts(WorkGraph& w) {
  std::vector<WNode> out_nodes;
  std::map<std::pair<int, Layout>, int> casts;  // (value, wanted layout) -> converted value
  std::map<int, int> reordered_weights;

  auto ensure = [&](int value, Layout want) -> int {
    WValue& v = w.values[static_cast<size_t>(value)];
    if (v.shape.rank() != 4 || v.layout == want) return value;
    auto key = std::make_pair(value, want);
    if (auto it = casts.find(key); it != casts.end()) return it->second;
    WValue c = v;
    c.name = v.name + (want == Layout::kNHWC ? ".nhwc" : ".nchw");
    c.kind = ValueKind::kActivation;
    c.layout = want;
    c.alias = -1;
    const int cv = w.add_value(std::move(c));
    WNode cast;
    cast.op = want == Layout::kNHWC ? OpKind::kLayoutToNHWC : OpKind::kLayoutToNCHW;
    cast.name = w.values[static_cast<size_t>(cv)].name;
    cast.in = {value};
    cast.out = cv;
    out_nodes.push_back(std::move(cast));
    casts[key] = cv;
    return cv;
  };

  for (WNode n : w.nodes) {
    WValue* out = &w.values[static_cast<size_t>(n.out)];
    if (needs_nhwc(n, w)) {
      n.in[0] = ensure(n.in[0], Layout::kNHWC);
      if (n.op == OpKind::kConv2d) {
        if (n.attrs.get_int("residual", 0) != 0) n.in.back() = ensure(n.in.back(), Layout::kNHWC);
        const int wv = n.in[1];
        auto it = reordered_weights.find(wv);
        if (it == reordered_weights.end()) {
          const WValue& src = w.values[static_cast<size_t>(wv)];
          ATOLL_CHECK(src.kind == ValueKind::kWeight, kUnsupported, "conv '{}': weights must be constants", n.name);
          const int nv = w.add_weight(src.name + ".ohwi", to_ohwi(w.weights.at(src.name), w.compute_values));
          w.values[static_cast<size_t>(nv)].layout = Layout::kNHWC;
          it = reordered_weights.emplace(wv, nv).first;
        }
        n.in[1] = it->second;
      }
      out = &w.values[static_cast<size_t>(n.out)];
      out->layout = out->shape.rank() == 4 ? Layout::kNHWC : Layout::kRowMajor;
    } else if (follows_input(n.op) && out->shape.rank() == 4) {
      bool any_nhwc = false, same_shapes = true;
      for (int in : n.in) {
        any_nhwc |= w.values[static_cast<size_t>(in)].layout == Layout::kNHWC;
        const Shape& s = w.values[static_cast<size_t>(in)].shape;
        same_shapes &= n.op == OpKind::kConcat ? s.rank() == 4 : s == out->shape;
      }
      const Layout want = any_nhwc && same_shapes ? Layout::kNHWC : Layout::kRowMajor;
      for (int& in : n.in) in = ensure(in, want);
      out = &w.values[static_cast<size_t>(n.out)];
      out->layout = want;
    } else if (is_view(n.op)) {
      const WValue& in = w.values[static_cast<size_t>(n.in[0])];
      const bool same_order = in.layout == Layout::kRowMajor || (in.shape[2] == 1 && in.shape[3] == 1);
      if (!same_order) n.in[0] = ensure(n.in[0], Layout::kRowMajor);
      out = &w.values[static_cast<size_t>(n.out)];
      out->layout = Layout::kRowMajor;
    } else {
      for (int& in : n.in) {
        if (w.values[static_cast<size_t>(in)].kind == ValueKind::kActivation ||
            w.values[static_cast<size_t>(in)].kind == ValueKind::kInput) {
          in = ensure(in, Layout::kRowMajor);
        }
      }
      out = &w.values[static_cast<size_t>(n.out)];
      out->layout = Layout::kRowMajor;
    }
    out_nodes.push_back(std::move(n));
  }
  w.nodes = std::move(out_nodes);
  // Model outputs are handed back in logical order.
  for (int& o : w.outputs) {
    if (w.values[static_cast<size_t>(o)].layout != Layout::kNHWC) continue;
    WValue c = w.values[static_cast<size_t>(o)];
    c.name += ".nchw";
    c.layout = Layout::kRowMajor;
    const int cv = w.add_value(std::move(c));
    w.nodes.push_back(WNode{OpKind::kLayoutToNCHW, w.values[static_cast<size_t>(cv)].name, {o}, cv, {}, false});
    o = cv;
  }
}

}  // namespace atl::compile_detail
