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

// Walks the nodes in order, choosing each one's layout and inserting the casts its inputs need.
class LayoutAssigner {
 public:
  explicit LayoutAssigner(WorkGraph& w) : w_(w) {}

  void run() {
    for (WNode n : w_.nodes) {
      Layout out;
      if (needs_nhwc(n, w_)) {
        out = place_nhwc(n);
      } else if (follows_input(n.op) && value(n.out).shape.rank() == 4) {
        out = place_follower(n);
      } else if (is_view(n.op)) {
        out = place_view(n);
      } else {
        out = place_row_major(n);
      }
      value(n.out).layout = out;
      nodes_.push_back(std::move(n));
    }
    w_.nodes = std::move(nodes_);
    cast_outputs();
  }

 private:
  WValue& value(int v) { return w_.values[static_cast<size_t>(v)]; }

  // `v` in layout `want`: itself, or the one cast of it to that layout.
  int ensure(int v, Layout want) {
    if (value(v).shape.rank() != 4 || value(v).layout == want) return v;
    const auto key = std::make_pair(v, want);
    if (auto it = casts_.find(key); it != casts_.end()) return it->second;
    WValue c = value(v);
    c.name += want == Layout::kNHWC ? ".nhwc" : ".nchw";
    c.kind = ValueKind::kActivation;
    c.layout = want;
    c.alias = -1;
    const int cv = w_.add_value(std::move(c));
    WNode cast;
    cast.op = want == Layout::kNHWC ? OpKind::kLayoutToNHWC : OpKind::kLayoutToNCHW;
    cast.name = value(cv).name;
    cast.in = {v};
    cast.out = cv;
    nodes_.push_back(std::move(cast));
    casts_[key] = cv;
    return cv;
  }

  // A convolution's weights reordered once to [O, kh, kw, I].
  int reordered_weight(const WNode& n, int wv) {
    auto it = reordered_weights_.find(wv);
    if (it == reordered_weights_.end()) {
      const WValue& src = value(wv);
      ATOLL_CHECK(src.kind == ValueKind::kWeight, kUnsupported, "conv '{}': weights must be constants", n.name);
      const int nv = w_.add_weight(src.name + ".ohwi", to_ohwi(w_.weights.at(src.name), w_.compute_values));
      value(nv).layout = Layout::kNHWC;
      it = reordered_weights_.emplace(wv, nv).first;
    }
    return it->second;
  }

  Layout place_nhwc(WNode& n) {
    n.in[0] = ensure(n.in[0], Layout::kNHWC);
    if (n.op == OpKind::kConv2d) {
      if (n.attrs.get_int("residual", 0) != 0) n.in.back() = ensure(n.in.back(), Layout::kNHWC);
      n.in[1] = reordered_weight(n, n.in[1]);
    }
    return value(n.out).shape.rank() == 4 ? Layout::kNHWC : Layout::kRowMajor;
  }

  // NHWC when any input is and the shapes line up element for element (Concat: all rank 4).
  Layout place_follower(WNode& n) {
    bool any_nhwc = false, same_shapes = true;
    const Shape out_shape = value(n.out).shape;
    for (int in : n.in) {
      any_nhwc |= value(in).layout == Layout::kNHWC;
      const Shape& s = value(in).shape;
      same_shapes &= n.op == OpKind::kConcat ? s.rank() == 4 : s == out_shape;
    }
    const Layout want = any_nhwc && same_shapes ? Layout::kNHWC : Layout::kRowMajor;
    for (int& in : n.in) in = ensure(in, want);
    return want;
  }

  Layout place_view(WNode& n) {
    const WValue& in = value(n.in[0]);
    const bool same_order = in.layout == Layout::kRowMajor || (in.shape[2] == 1 && in.shape[3] == 1);
    if (!same_order) n.in[0] = ensure(n.in[0], Layout::kRowMajor);
    return Layout::kRowMajor;
  }

  Layout place_row_major(WNode& n) {
    for (int& in : n.in) {
      if (value(in).kind == ValueKind::kActivation || value(in).kind == ValueKind::kInput) {
        in = ensure(in, Layout::kRowMajor);
      }
    }
    return Layout::kRowMajor;
  }

  // Model outputs are handed back in logical order.
  void cast_outputs() {
    for (int& o : w_.outputs) {
      if (value(o).layout != Layout::kNHWC) continue;
      WValue c = value(o);
      c.name += ".nchw";
      c.layout = Layout::kRowMajor;
      const int cv = w_.add_value(std::move(c));
      w_.nodes.push_back(WNode{OpKind::kLayoutToNCHW, value(cv).name, {o}, cv, {}, false});
      o = cv;
    }
  }

  WorkGraph& w_;
  std::vector<WNode> nodes_;
  std::map<std::pair<int, Layout>, int> casts_;  // (value, wanted layout) -> converted value
  std::map<int, int> reordered_weights_;
};

}  // namespace

void assign_layouts(WorkGraph& w) { LayoutAssigner(w).run(); }

}  // namespace atl::compile_detail
