// Shape and dtype inference, one function per op family. Errors name the node and what is wrong.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_attrs.h"

namespace atl {

namespace {

#define NODE_CHECK(cond, ...)                                                                        \
  ATOLL_CHECK(cond, kInvalidGraph, "node '{}' ({}): {}", n.name, op_name(n.op), fmt::format(__VA_ARGS__))

const Value& in(const Graph& g, const Node& n, size_t i) { return g.value(n.inputs[i]); }

void expect_inputs(const Node& n, size_t lo, size_t hi) {
  NODE_CHECK(n.inputs.size() >= lo && n.inputs.size() <= hi, "expects {}..{} inputs, got {}", lo, hi,
             n.inputs.size());
}

void expect_float(const Node& n, const Value& v) {
  NODE_CHECK(is_float(v.dtype), "input '{}' must be floating point, is {}", v.name, dtype_name(v.dtype));
}

Shape broadcast(const Node& n, const Shape& a, const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int64_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    const int64_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    NODE_CHECK(da == db || da == 1 || db == 1, "shapes {} and {} do not broadcast", a.str(), b.str());
    out[static_cast<size_t>(i)] = std::max(da, db);
  }
  return Shape(out);
}

int norm_axis(const Node& n, int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  NODE_CHECK(a >= 0 && a < rank, "axis {} out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

}  // namespace

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t pad_lo, int64_t pad_hi, int64_t dil, bool ceil_mode) {
  const int64_t eff = dil * (k - 1) + 1;
  const int64_t span = in + pad_lo + pad_hi - eff;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // PyTorch rule: the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= in + pad_lo) --out;
  return out;
}

namespace {

Shape swap12(const Shape& s) {
  std::vector<int64_t> d = s.dims();
  std::swap(d[1], d[2]);
  return Shape(d);
}

}  // namespace

MatMulShapes matmul_shapes(const Attrs& attrs, const Shape& a_stored, const Shape& b_stored) {
  MatMulShapes s;
  s.trans_b = attrs.get_int("trans_b", 0) != 0;
  s.swap_a = attrs.get_int("a_swap12", 0) != 0;
  s.swap_b = attrs.get_int("b_swap12", 0) != 0;
  s.swap_y = attrs.get_int("y_swap12", 0) != 0;
  const int r = a_stored.rank();
  if (r < 2 || b_stored.rank() != r) {
    s.error = fmt::format("ranks must match and be >= 2: {} vs {}", a_stored.str(), b_stored.str());
    return s;
  }
  if ((s.swap_a || s.swap_b || s.swap_y) && r != 4) {
    s.error = fmt::format("a_swap12 / b_swap12 / y_swap12 need rank-4 operands, got {}", a_stored.str());
    return s;
  }
  s.a = s.swap_a ? swap12(a_stored) : a_stored;
  s.b = s.swap_b ? swap12(b_stored) : b_stored;
  for (int d = 0; d < r - 2; ++d) {
    if (s.a[d] != s.b[d]) {
      s.error = fmt::format("batch dimensions differ: {} vs {}", s.a.str(), s.b.str());
      return s;
    }
    s.batch *= s.a[d];
  }
  s.m = s.a[r - 2];
  s.k = s.a[r - 1];
  s.n = s.trans_b ? s.b[r - 2] : s.b[r - 1];
  if ((s.trans_b ? s.b[r - 1] : s.b[r - 2]) != s.k) {
    s.error = fmt::format("inner dimensions differ: {} x {}{}", s.a.str(), s.b.str(), s.trans_b ? "^T" : "");
    return s;
  }
  std::vector<int64_t> y = s.a.dims();
  y.back() = s.n;
  s.y = Shape(y);
  s.y_stored = s.swap_y ? swap12(s.y) : s.y;
  return s;
}

Attrs attention_scores_attrs(const Attrs& attention) {
  return Attrs{{"trans_b", int64_t{1}},
               {"alpha", attention.get_float("scale", 1.0)},
               {"a_swap12", attention.get_int("q_swap12", 0)},
               {"b_swap12", attention.get_int("k_swap12", 0)}};
}

Attrs attention_context_attrs(const Attrs& attention) {
  return Attrs{{"b_swap12", attention.get_int("v_swap12", 0)}, {"y_swap12", attention.get_int("y_swap12", 0)}};
}

AttentionShapes attention_shapes(const Attrs& attrs, const Shape& q_stored, const Shape& k_stored,
                                 const Shape& v_stored) {
  AttentionShapes s;
  if (q_stored.rank() != 4 || k_stored.rank() != 4 || v_stored.rank() != 4) {
    s.error = fmt::format("attention takes rank-4 q, k and v, got {}, {} and {}", q_stored.str(), k_stored.str(),
                          v_stored.str());
    return s;
  }
  s.scores = matmul_shapes(attention_scores_attrs(attrs), q_stored, k_stored);
  if (!s.scores.error.empty()) {
    s.error = "q k^T: " + s.scores.error;
    return s;
  }
  s.context = matmul_shapes(attention_context_attrs(attrs), s.scores.y, v_stored);
  if (!s.context.error.empty()) s.error = "softmax(q k^T) v: " + s.context.error;
  return s;
}

MatrixStrides matrix_strides(const Shape& logical, bool swapped) {
  const int r = logical.rank();
  const int64_t rows = logical[r - 2], cols = logical[r - 1];
  MatrixStrides m;
  m.inner = r == 4 ? logical[1] : logical.numel() / (rows * cols);
  if (!swapped) {
    m.ld = cols;
    m.inner_stride = rows * cols;
    m.outer_stride = m.inner * rows * cols;
    return m;
  }
  // Stored [d0, rows, inner, cols]: matrix (i0, i1) starts at i0 * rows * inner * cols + i1 * cols.
  m.ld = m.inner * cols;
  m.inner_stride = cols;
  m.outer_stride = rows * m.inner * cols;
  return m;
}

Conv2dParams conv2d_params(const Attrs& a) {
  Conv2dParams p;
  auto stride = a.get_ints("stride", {1, 1});
  auto pads = a.get_ints("pads", {0, 0, 0, 0});
  auto dil = a.get_ints("dilation", {1, 1});
  ATOLL_CHECK(stride.size() == 2 && pads.size() == 4 && dil.size() == 2, kInvalidGraph,
              "conv attributes: stride[2], pads[4], dilation[2] expected");
  p.stride_h = stride[0];
  p.stride_w = stride[1];
  p.pad_t = pads[0];
  p.pad_l = pads[1];
  p.pad_b = pads[2];
  p.pad_r = pads[3];
  p.dil_h = dil[0];
  p.dil_w = dil[1];
  p.group = a.get_int("group", 1);
  p.act = act_from_name(a.get_string("act", "none"));
  p.has_bias = a.get_int("bias", 0) != 0;
  p.has_residual = a.get_int("residual", 0) != 0;
  return p;
}

PoolParams pool_params(const Attrs& a) {
  PoolParams p;
  auto k = a.get_ints("kernel");
  auto stride = a.get_ints("stride", k);
  auto pads = a.get_ints("pads", {0, 0, 0, 0});
  ATOLL_CHECK(k.size() == 2 && stride.size() == 2 && pads.size() == 4, kInvalidGraph,
              "pool attributes: kernel[2], stride[2], pads[4] expected");
  p.k_h = k[0];
  p.k_w = k[1];
  p.stride_h = stride[0];
  p.stride_w = stride[1];
  p.pad_t = pads[0];
  p.pad_l = pads[1];
  p.pad_b = pads[2];
  p.pad_r = pads[3];
  p.ceil_mode = a.get_int("ceil_mode", 0) != 0;
  p.count_include_pad = a.get_int("count_include_pad", 1) != 0;
  return p;
}

namespace {

std::vector<InferredType> infer_conv2d(const Graph& g, const Node& n) {
  const Conv2dParams p = conv2d_params(n.attrs);
  const size_t need = 2 + (p.has_bias ? 1 : 0) + (p.has_residual ? 1 : 0);
  expect_inputs(n, need, need);
  const Value& x = in(g, n, 0);
  const Value& w = in(g, n, 1);
  expect_float(n, x);
  NODE_CHECK(x.shape.rank() == 4, "input '{}' must be 4-D NCHW, is {}", x.name, x.shape.str());
  NODE_CHECK(w.shape.rank() == 4, "weight '{}' must be 4-D OIHW, is {}", w.name, w.shape.str());
  NODE_CHECK(p.group >= 1 && x.shape[1] % p.group == 0 && w.shape[0] % p.group == 0,
             "group {} does not divide channels {} -> {}", p.group, x.shape[1], w.shape[0]);
  NODE_CHECK(w.shape[1] * p.group == x.shape[1], "weight {} expects {} input channels, input has {}",
             w.shape.str(), w.shape[1] * p.group, x.shape[1]);
  NODE_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.dil_h > 0 && p.dil_w > 0, "stride and dilation must be > 0");
  const int64_t oh = pool_out_size(x.shape[2], w.shape[2], p.stride_h, p.pad_t, p.pad_b, p.dil_h, false);
  const int64_t ow = pool_out_size(x.shape[3], w.shape[3], p.stride_w, p.pad_l, p.pad_r, p.dil_w, false);
  NODE_CHECK(oh > 0 && ow > 0, "kernel {}x{} larger than padded input {}", w.shape[2], w.shape[3], x.shape.str());
  Shape out{x.shape[0], w.shape[0], oh, ow};
  size_t next = 2;
  if (p.has_bias) {
    const Value& b = in(g, n, next++);
    NODE_CHECK(b.shape == Shape({w.shape[0]}), "bias must be [{}], is {}", w.shape[0], b.shape.str());
  }
  if (p.has_residual) {
    const Value& r = in(g, n, next++);
    NODE_CHECK(r.shape == out, "residual {} does not match output {}", r.shape.str(), out.str());
  }
  return {{x.dtype, out}};
}

std::vector<InferredType> infer_batch_norm(const Graph& g, const Node& n) {
  expect_inputs(n, 5, 5);
  const Value& x = in(g, n, 0);
  expect_float(n, x);
  NODE_CHECK(x.shape.rank() >= 2, "input must have a channel axis, is {}", x.shape.str());
  for (size_t i = 1; i < 5; ++i) {
    NODE_CHECK(in(g, n, i).shape == Shape({x.shape[1]}), "parameter '{}' must be [{}], is {}", in(g, n, i).name,
               x.shape[1], in(g, n, i).shape.str());
  }
  return {{x.dtype, x.shape}};
}

std::vector<InferredType> infer_unary(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  expect_float(n, in(g, n, 0));
  return {{in(g, n, 0).dtype, in(g, n, 0).shape}};
}

std::vector<InferredType> infer_binary(const Graph& g, const Node& n) {
  expect_inputs(n, 2, 2);
  const Value& a = in(g, n, 0);
  const Value& b = in(g, n, 1);
  NODE_CHECK(a.dtype == b.dtype, "dtypes differ: {} vs {}", dtype_name(a.dtype), dtype_name(b.dtype));
  expect_float(n, a);
  return {{a.dtype, broadcast(n, a.shape, b.shape)}};
}

std::vector<InferredType> infer_pool(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  expect_float(n, x);
  NODE_CHECK(x.shape.rank() == 4, "input must be 4-D NCHW, is {}", x.shape.str());
  const PoolParams p = pool_params(n.attrs);
  NODE_CHECK(p.k_h > 0 && p.k_w > 0 && p.stride_h > 0 && p.stride_w > 0, "kernel and stride must be > 0");
  NODE_CHECK(p.pad_t * 2 <= p.k_h && p.pad_l * 2 <= p.k_w, "padding must be at most half the kernel");
  const int64_t oh = pool_out_size(x.shape[2], p.k_h, p.stride_h, p.pad_t, p.pad_b, 1, p.ceil_mode);
  const int64_t ow = pool_out_size(x.shape[3], p.k_w, p.stride_w, p.pad_l, p.pad_r, 1, p.ceil_mode);
  NODE_CHECK(oh > 0 && ow > 0, "window larger than input {}", x.shape.str());
  return {{x.dtype, Shape{x.shape[0], x.shape[1], oh, ow}}};
}

std::vector<InferredType> infer_global_avg_pool(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  NODE_CHECK(x.shape.rank() == 4, "input must be 4-D NCHW, is {}", x.shape.str());
  return {{x.dtype, Shape{x.shape[0], x.shape[1], 1, 1}}};
}

std::vector<InferredType> infer_concat(const Graph& g, const Node& n) {
  NODE_CHECK(!n.inputs.empty(), "needs at least one input");
  const Value& a = in(g, n, 0);
  const int axis = norm_axis(n, n.attrs.get_int("axis"), a.shape.rank());
  std::vector<int64_t> out = a.shape.dims();
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const Value& b = in(g, n, i);
    NODE_CHECK(b.dtype == a.dtype && b.shape.rank() == a.shape.rank(), "input '{}' {} does not match '{}' {}",
               b.name, b.shape.str(), a.name, a.shape.str());
    for (int d = 0; d < a.shape.rank(); ++d) {
      if (d == axis) continue;
      NODE_CHECK(b.shape[d] == a.shape[d], "input '{}' {} differs from {} outside axis {}", b.name, b.shape.str(),
                 a.shape.str(), axis);
    }
    out[static_cast<size_t>(axis)] += b.shape[axis];
  }
  return {{a.dtype, Shape(out)}};
}

std::vector<InferredType> infer_flatten(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  const int64_t axis = n.attrs.get_int("axis", 1);
  NODE_CHECK(axis >= 0 && axis <= x.shape.rank(), "axis {} out of range", axis);
  int64_t lead = 1, tail = 1;
  for (int d = 0; d < x.shape.rank(); ++d) (d < axis ? lead : tail) *= x.shape[d];
  return {{x.dtype, Shape{lead, tail}}};
}

std::vector<InferredType> infer_reshape(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  std::vector<int64_t> dims = n.attrs.get_ints("shape");
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      NODE_CHECK(infer_at < 0, "more than one -1 in shape");
      infer_at = static_cast<int>(i);
    } else {
      NODE_CHECK(dims[i] > 0, "bad dimension {} in shape", dims[i]);
      known *= dims[i];
    }
  }
  if (infer_at >= 0) {
    NODE_CHECK(known > 0 && x.shape.numel() % known == 0, "cannot infer -1 reshaping {}", x.shape.str());
    dims[static_cast<size_t>(infer_at)] = x.shape.numel() / known;
  }
  NODE_CHECK(Shape(dims).numel() == x.shape.numel(), "cannot reshape {} to {}", x.shape.str(), Shape(dims).str());
  return {{x.dtype, Shape(dims)}};
}

std::vector<InferredType> infer_transpose(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  const auto& perm = n.attrs.get_ints("perm");
  NODE_CHECK(static_cast<int>(perm.size()) == x.shape.rank(), "perm has {} entries for rank {}", perm.size(),
             x.shape.rank());
  std::vector<int64_t> seen(perm.size(), 0), out;
  for (int64_t p : perm) {
    NODE_CHECK(p >= 0 && p < x.shape.rank() && !seen[static_cast<size_t>(p)]++, "perm is not a permutation");
    out.push_back(x.shape[static_cast<int>(p)]);
  }
  return {{x.dtype, Shape(out)}};
}

std::vector<InferredType> infer_gemm(const Graph& g, const Node& n) {
  const bool bias = n.attrs.get_int("bias", 0) != 0;
  const bool residual = n.attrs.get_int("residual", 0) != 0;
  const size_t need = 2 + (bias ? 1 : 0) + (residual ? 1 : 0);
  expect_inputs(n, need, need);
  const Value& x = in(g, n, 0);
  const Value& w = in(g, n, 1);
  expect_float(n, x);
  NODE_CHECK(x.shape.rank() >= 2, "input must be at least 2-D, is {}", x.shape.str());
  NODE_CHECK(w.shape.rank() == 2, "weight must be [N, K], is {}", w.shape.str());
  NODE_CHECK(x.shape.dim(-1) == w.shape[1], "input {} has K={}, weight {} expects {}", x.shape.str(),
             x.shape.dim(-1), w.shape.str(), w.shape[1]);
  // groups G: G Gemms of one input, weights stacked [G * N, K], outputs stacked [G, ..., N].
  const int64_t groups = n.attrs.get_int("groups", 1);
  NODE_CHECK(groups >= 1 && w.shape[0] % groups == 0, "groups {} do not divide the weight's {} rows", groups,
             w.shape[0]);
  NODE_CHECK(groups == 1 || !residual, "grouped Gemms take no residual");
  std::vector<int64_t> out = x.shape.dims();
  out.back() = w.shape[0] / groups;
  if (groups > 1) out.insert(out.begin(), groups);
  size_t next = 2;
  if (bias) {
    NODE_CHECK(in(g, n, next).shape == Shape({w.shape[0]}), "bias must be [{}], is {}", w.shape[0],
               in(g, n, next).shape.str());
    ++next;
  }
  if (residual) {
    NODE_CHECK(in(g, n, next).shape == Shape(out), "residual {} does not match output {}",
               in(g, n, next).shape.str(), Shape(out).str());
  }
  return {{x.dtype, Shape(out)}};
}

std::vector<InferredType> infer_matmul(const Graph& g, const Node& n) {
  expect_inputs(n, 2, 2);
  expect_float(n, in(g, n, 0));
  const MatMulShapes s = matmul_shapes(n.attrs, in(g, n, 0).shape, in(g, n, 1).shape);
  NODE_CHECK(s.error.empty(), "{}", s.error);
  return {{in(g, n, 0).dtype, s.y_stored}};
}

std::vector<InferredType> infer_attention(const Graph& g, const Node& n) {
  expect_inputs(n, 3, 3);
  expect_float(n, in(g, n, 0));
  const AttentionShapes s = attention_shapes(n.attrs, in(g, n, 0).shape, in(g, n, 1).shape, in(g, n, 2).shape);
  NODE_CHECK(s.error.empty(), "{}", s.error);
  return {{in(g, n, 0).dtype, s.context.y_stored}};
}

std::vector<InferredType> infer_softmax(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  norm_axis(n, n.attrs.get_int("axis", -1), x.shape.rank());
  return {{x.dtype, x.shape}};
}

std::vector<InferredType> infer_layer_norm(const Graph& g, const Node& n) {
  expect_inputs(n, 3, 3);
  const Value& x = in(g, n, 0);
  const int64_t d = x.shape.dim(-1);
  NODE_CHECK(in(g, n, 1).shape == Shape({d}) && in(g, n, 2).shape == Shape({d}),
             "gamma and beta must be [{}]", d);
  return {{x.dtype, x.shape}};
}

std::vector<InferredType> infer_gather(const Graph& g, const Node& n) {
  expect_inputs(n, 2, 2);
  const Value& table = in(g, n, 0);
  const Value& idx = in(g, n, 1);
  NODE_CHECK(table.shape.rank() == 2, "table must be [V, D], is {}", table.shape.str());
  NODE_CHECK(idx.dtype == DType::kI64 || idx.dtype == DType::kI32, "indices must be integers, are {}",
             dtype_name(idx.dtype));
  std::vector<int64_t> out = idx.shape.dims();
  out.push_back(table.shape[1]);
  return {{table.dtype, Shape(out)}};
}

std::vector<InferredType> infer_slice(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  const auto& axes = n.attrs.get_ints("axes");
  const auto& starts = n.attrs.get_ints("starts");
  const auto& ends = n.attrs.get_ints("ends");
  const auto steps = n.attrs.get_ints("steps", std::vector<int64_t>(axes.size(), 1));
  NODE_CHECK(starts.size() == axes.size() && ends.size() == axes.size() && steps.size() == axes.size(),
             "axes, starts, ends and steps must have equal length");
  std::vector<int64_t> out = x.shape.dims();
  for (size_t i = 0; i < axes.size(); ++i) {
    const int axis = norm_axis(n, axes[i], x.shape.rank());
    const int64_t dim = x.shape[axis];
    NODE_CHECK(steps[i] > 0, "only positive steps are supported");
    const int64_t s = std::clamp(starts[i] < 0 ? starts[i] + dim : starts[i], int64_t{0}, dim);
    const int64_t e = std::clamp(ends[i] < 0 ? ends[i] + dim : ends[i], int64_t{0}, dim);
    NODE_CHECK(e > s, "empty slice [{}:{}] on axis {}", s, e, axis);
    out[static_cast<size_t>(axis)] = (e - s + steps[i] - 1) / steps[i];
  }
  return {{x.dtype, Shape(out)}};
}

std::vector<InferredType> infer_layout_cast(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  NODE_CHECK(in(g, n, 0).shape.rank() == 4, "layout casts need a 4-D input");
  return {{in(g, n, 0).dtype, in(g, n, 0).shape}};
}

std::vector<InferredType> infer_scale_shift(const Graph& g, const Node& n) {
  expect_inputs(n, 3, 3);
  const Value& x = in(g, n, 0);
  NODE_CHECK(x.shape.rank() >= 2, "input must have a channel axis, is {}", x.shape.str());
  NODE_CHECK(in(g, n, 1).shape == Shape({x.shape[1]}) && in(g, n, 2).shape == Shape({x.shape[1]}),
             "scale and shift must be [{}]", x.shape[1]);
  return {{x.dtype, x.shape}};
}

std::vector<InferredType> infer_reduce_mean(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  const Value& x = in(g, n, 0);
  expect_float(n, x);
  const auto& axes = n.attrs.get_ints("axes");
  const bool keep = n.attrs.get_int("keepdims", 1) != 0;
  NODE_CHECK(!axes.empty(), "needs at least one axis");
  std::vector<bool> reduced(static_cast<size_t>(x.shape.rank()), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    NODE_CHECK(axes[i] >= 0 && axes[i] < x.shape.rank() && (i == 0 || axes[i] > axes[i - 1]),
               "axes must be ascending and within rank {}", x.shape.rank());
    reduced[static_cast<size_t>(axes[i])] = true;
  }
  std::vector<int64_t> out;
  for (int d = 0; d < x.shape.rank(); ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      out.push_back(x.shape[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return {{x.dtype, Shape(out)}};
}

std::vector<InferredType> infer_cast(const Graph& g, const Node& n) {
  expect_inputs(n, 1, 1);
  return {{dtype_from_name(n.attrs.get_string("to")), in(g, n, 0).shape}};
}

}  // namespace

std::vector<InferredType> infer_node(const Graph& g, const Node& n) {
  switch (n.op) {
    case OpKind::kConv2d:
      return infer_conv2d(g, n);
    case OpKind::kBatchNorm:
      return infer_batch_norm(g, n);
    case OpKind::kRelu:
    case OpKind::kRelu6:
    case OpKind::kGelu:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kErf:
    case OpKind::kSqrt:
    case OpKind::kClip:
    case OpKind::kDropout:
      return infer_unary(g, n);
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kSub:
    case OpKind::kDiv:
    case OpKind::kPow:
      return infer_binary(g, n);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return infer_pool(g, n);
    case OpKind::kGlobalAvgPool:
      return infer_global_avg_pool(g, n);
    case OpKind::kConcat:
      return infer_concat(g, n);
    case OpKind::kFlatten:
      return infer_flatten(g, n);
    case OpKind::kReshape:
      return infer_reshape(g, n);
    case OpKind::kTranspose:
      return infer_transpose(g, n);
    case OpKind::kGemm:
      return infer_gemm(g, n);
    case OpKind::kMatMul:
      return infer_matmul(g, n);
    case OpKind::kSoftmax:
      return infer_softmax(g, n);
    case OpKind::kLayerNorm:
      return infer_layer_norm(g, n);
    case OpKind::kGather:
      return infer_gather(g, n);
    case OpKind::kSlice:
      return infer_slice(g, n);
    case OpKind::kLayoutToNHWC:
    case OpKind::kLayoutToNCHW:
      return infer_layout_cast(g, n);
    case OpKind::kScaleShift:
      return infer_scale_shift(g, n);
    case OpKind::kReduceMean:
      return infer_reduce_mean(g, n);
    case OpKind::kCast:
      return infer_cast(g, n);
    case OpKind::kAttention:
      return infer_attention(g, n);
    case OpKind::kCount:
      break;
  }
  ATOLL_THROW(kInvalidGraph, "node '{}': unknown op", n.name);
}

}  // namespace atl
