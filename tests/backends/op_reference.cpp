// Naive reference implementations of every compiled op on logical tensors (images NCHW,
// everything row-major), accumulating in double. Written for obviousness, not speed.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/op_attrs.h"
#include "op_cases.h"

namespace atl::opcases {

namespace {

using Index = std::vector<int64_t>;

int64_t flat_index(const Shape& s, const Index& idx) {
  int64_t f = 0;
  for (int d = 0; d < s.rank(); ++d) f = f * s[d] + idx[static_cast<size_t>(d)];
  return f;
}

// Calls f(index) for every index of `s` in row-major order.
template <typename F>
void for_each_index(const Shape& s, F&& f) {
  Index idx(static_cast<size_t>(s.rank()), 0);
  for (int64_t n = 0; n < s.numel(); ++n) {
    f(idx);
    for (int d = s.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < s[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

double at(const Tensor& t, const Index& idx) {
  return t.as<float>()[static_cast<size_t>(flat_index(t.shape(), idx))];
}

double at(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t f = 0;
  int d = 0;
  for (int64_t i : idx) f = f * t.shape()[d++] + i;
  return t.as<float>()[static_cast<size_t>(f)];
}

double activation(const std::string& act, double x) {
  if (act == "relu") return std::max(x, 0.0);
  if (act == "relu6") return std::min(std::max(x, 0.0), 6.0);
  if (act == "gelu") return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (act == "tanh") return std::tanh(x);
  return x;
}

// Output tensor filled by f(index) -> double.
template <typename F>
Tensor generate(const Shape& out, F&& f) {
  Tensor t(DType::kF32, out);
  auto v = t.as<float>();
  size_t i = 0;
  for_each_index(out, [&](const Index& idx) { v[i++] = static_cast<float>(f(idx)); });
  return t;
}

Tensor conv(const Attrs& attrs, const std::vector<Tensor>& ops, const Shape& out) {
  const Conv2dParams p = conv2d_params(attrs);
  const Tensor& x = ops[0];
  const Tensor& w = ops[1];
  const int64_t h = x.shape()[2], wd = x.shape()[3];
  const int64_t cg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const int64_t og = w.shape()[0] / p.group;
  const std::string act = attrs.get_string("act", "none");
  return generate(out, [&](const Index& i) {
    const int64_t n = i[0], o = i[1], oy = i[2], ox = i[3];
    const int64_t g = o / og;
    double acc = 0.0;
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t r = 0; r < kh; ++r) {
        for (int64_t s = 0; s < kw; ++s) {
          const int64_t iy = oy * p.stride_h - p.pad_t + r * p.dil_h;
          const int64_t ix = ox * p.stride_w - p.pad_l + s * p.dil_w;
          if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
          acc += at(x, {n, g * cg + c, iy, ix}) * at(w, {o, c, r, s});
        }
      }
    }
    size_t next = 2;
    if (p.has_bias) acc += at(ops[next++], {o});
    if (p.has_residual) acc += at(ops[next], i);
    return activation(act, acc);
  });
}

Tensor pool(OpKind op, const Attrs& attrs, const Tensor& x, const Shape& out) {
  const PoolParams p = pool_params(attrs);
  const int64_t h = x.shape()[2], w = x.shape()[3];
  return generate(out, [&](const Index& i) {
    const int64_t y0 = i[2] * p.stride_h - p.pad_t, x0 = i[3] * p.stride_w - p.pad_l;
    double best = -std::numeric_limits<double>::infinity(), sum = 0.0;
    int64_t inside = 0, padded = 0;
    for (int64_t r = 0; r < p.k_h; ++r) {
      for (int64_t s = 0; s < p.k_w; ++s) {
        const int64_t iy = y0 + r, ix = x0 + s;
        // A tap counts toward count_include_pad's divisor when it lies in the padded input.
        if (iy < h + p.pad_b && ix < w + p.pad_r) ++padded;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        const double v = at(x, {i[0], i[1], iy, ix});
        best = std::max(best, v);
        sum += v;
        ++inside;
      }
    }
    if (op == OpKind::kMaxPool) return best;
    return sum / static_cast<double>(p.count_include_pad ? padded : inside);
  });
}

// Index of operand `s` (right-aligned, size-1 dimensions broadcast) for output index `i`.
Index broadcast_index(const Shape& s, const Index& i) {
  Index r(static_cast<size_t>(s.rank()));
  const size_t lead = i.size() - static_cast<size_t>(s.rank());
  for (int d = 0; d < s.rank(); ++d) r[static_cast<size_t>(d)] = s[d] == 1 ? 0 : i[lead + static_cast<size_t>(d)];
  return r;
}

Tensor concat(const Attrs& attrs, const std::vector<Tensor>& ops, const Shape& out) {
  int64_t axis = attrs.get_int("axis");
  if (axis < 0) axis += out.rank();
  return generate(out, [&](const Index& i) {
    Index j = i;
    for (const Tensor& t : ops) {
      const int64_t size = t.shape()[static_cast<int>(axis)];
      if (j[static_cast<size_t>(axis)] < size) return at(t, j);
      j[static_cast<size_t>(axis)] -= size;
    }
    return std::numeric_limits<double>::quiet_NaN();
  });
}

Tensor slice(const Attrs& attrs, const Tensor& x, const Shape& out) {
  const auto& axes = attrs.get_ints("axes");
  const auto& starts = attrs.get_ints("starts");
  const auto steps = attrs.get_ints("steps", std::vector<int64_t>(axes.size(), 1));
  return generate(out, [&](const Index& i) {
    Index j = i;
    for (size_t a = 0; a < axes.size(); ++a) {
      const int axis = static_cast<int>(axes[a] < 0 ? axes[a] + x.shape().rank() : axes[a]);
      const int64_t dim = x.shape()[axis];
      const int64_t start = std::clamp(starts[a] < 0 ? starts[a] + dim : starts[a], int64_t{0}, dim);
      j[static_cast<size_t>(axis)] = start + i[static_cast<size_t>(axis)] * steps[a];
    }
    return at(x, j);
  });
}

Tensor gemm(const Attrs& attrs, const std::vector<Tensor>& ops, const Shape& out) {
  const Tensor& x = ops[0];
  const Tensor& w = ops[1];
  const bool bias = attrs.get_int("bias", 0) != 0, residual = attrs.get_int("residual", 0) != 0;
  const std::string act = attrs.get_string("act", "none");
  const int64_t k = w.shape()[1];
  // groups: output [G, ..., n], group g's weight rows [g n, (g + 1) n).
  const bool grouped = attrs.get_int("groups", 1) > 1;
  return generate(out, [&](const Index& i) {
    const int64_t row = grouped ? i[0] * out.dim(-1) + i.back() : i.back();
    Index xi = grouped ? Index(i.begin() + 1, i.end()) : i;
    double acc = 0.0;
    for (int64_t kk = 0; kk < k; ++kk) {
      xi.back() = kk;
      acc += at(x, xi) * at(w, {row, kk});
    }
    if (bias) acc += at(ops[2], {row});
    if (residual) acc += at(ops[bias ? 3 : 2], i);
    return activation(act, acc);
  });
}

// Indices 1 and 2 of a rank-4 index swapped where `swapped` (MatMul's *_swap12 attributes: the
// tensor is stored with those dims swapped).
Index stored_index(Index i, bool swapped) {
  if (swapped) std::swap(i[1], i[2]);
  return i;
}

Tensor matmul(const Attrs& attrs, const Tensor& a, const Tensor& b, const Shape& out) {
  const bool trans_b = attrs.get_int("trans_b", 0) != 0;
  const bool swap_a = attrs.get_int("a_swap12", 0) != 0, swap_b = attrs.get_int("b_swap12", 0) != 0;
  const bool swap_y = attrs.get_int("y_swap12", 0) != 0;
  const double alpha = attrs.get_float("alpha", 1.0);
  const int64_t k = a.shape().dim(-1);
  return generate(out, [&](const Index& stored) {
    const Index i = stored_index(stored, swap_y);  // the logical output element
    Index ai = i, bi = i;
    const size_t r = i.size();
    double acc = 0.0;
    for (int64_t kk = 0; kk < k; ++kk) {
      ai[r - 1] = kk;
      if (trans_b) {
        bi[r - 2] = i[r - 1];
        bi[r - 1] = kk;
      } else {
        bi[r - 2] = kk;
        bi[r - 1] = i[r - 1];
      }
      acc += at(a, stored_index(ai, swap_a)) * at(b, stored_index(bi, swap_b));
    }
    return alpha * acc;
  });
}

Tensor softmax(const Attrs& attrs, const Tensor& x) {
  const int rank = x.shape().rank();
  int64_t axis = attrs.get_int("axis", -1);
  if (axis < 0) axis += rank;
  const auto a = static_cast<size_t>(axis);
  return generate(x.shape(), [&](const Index& i) {
    Index j = i;
    double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (j[a] = 0; j[a] < x.shape()[static_cast<int>(axis)]; ++j[a]) max = std::max(max, at(x, j));
    for (j[a] = 0; j[a] < x.shape()[static_cast<int>(axis)]; ++j[a]) sum += std::exp(at(x, j) - max);
    return std::exp(at(x, i) - max) / sum;
  });
}

// The chain Attention replaces, from the references of its parts.
Tensor attention(const Attrs& attrs, const std::vector<Tensor>& ops, const Shape& out) {
  const AttentionShapes s = attention_shapes(attrs, ops[0].shape(), ops[1].shape(), ops[2].shape());
  const Tensor scores = matmul(attention_scores_attrs(attrs), ops[0], ops[1], s.scores.y_stored);
  return matmul(attention_context_attrs(attrs), softmax(Attrs{{"axis", int64_t{-1}}}, scores), ops[2], out);
}

Tensor layer_norm(const Attrs& attrs, const std::vector<Tensor>& ops) {
  const Tensor& x = ops[0];
  const double eps = attrs.get_float("epsilon", 1e-5);
  const int64_t width = x.shape().dim(-1);
  return generate(x.shape(), [&](const Index& i) {
    Index j = i;
    double mean = 0.0, var = 0.0;
    for (j.back() = 0; j.back() < width; ++j.back()) mean += at(x, j);
    mean /= static_cast<double>(width);
    for (j.back() = 0; j.back() < width; ++j.back()) var += (at(x, j) - mean) * (at(x, j) - mean);
    var /= static_cast<double>(width);
    return (at(x, i) - mean) / std::sqrt(var + eps) * at(ops[1], {i.back()}) + at(ops[2], {i.back()});
  });
}

double arithmetic(OpKind op, double a, double b) {
  switch (op) {
    case OpKind::kAdd: return a + b;
    case OpKind::kSub: return a - b;
    case OpKind::kMul: return a * b;
    case OpKind::kDiv: return a / b;
    default: return std::pow(a, b);
  }
}

double unary_math(OpKind op, const Attrs& attrs, double x) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (op) {
    case OpKind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case OpKind::kHardSigmoid:
      return std::clamp(attrs.get_float("alpha", 0.2) * x + attrs.get_float("beta", 0.5), 0.0, 1.0);
    case OpKind::kHardSwish: return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case OpKind::kErf: return std::erf(x);
    case OpKind::kSqrt: return std::sqrt(x);
    default: return std::clamp(x, attrs.get_float("min", -inf), attrs.get_float("max", inf));
  }
}

// Mean over `axes` with plain index loops: every input index adds to the output index it maps to.
Tensor reduce_mean(const Attrs& attrs, const Tensor& x, const Shape& out) {
  const auto& axes = attrs.get_ints("axes");
  const bool keep = attrs.get_int("keepdims", 1) != 0;
  std::vector<double> sums(static_cast<size_t>(out.numel()), 0.0);
  int64_t count = 1;
  for (int64_t a : axes) count *= x.shape()[static_cast<int>(a)];
  for_each_index(x.shape(), [&](const Index& i) {
    Index o;
    for (size_t d = 0; d < i.size(); ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
      if (!reduced) o.push_back(i[d]);
      else if (keep) o.push_back(0);
    }
    sums[static_cast<size_t>(flat_index(out, o))] += at(x, i);
  });
  return generate(out, [&](const Index& i) { return sums[static_cast<size_t>(flat_index(out, i))] / count; });
}

}  // namespace

Tensor reference_op(OpKind op, const Attrs& attrs, const std::vector<Tensor>& ops, const Shape& out) {
  switch (op) {
    case OpKind::kConv2d:
      return conv(attrs, ops, out);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return pool(op, attrs, ops[0], out);
    case OpKind::kGlobalAvgPool:
      return generate(out, [&](const Index& i) {
        double sum = 0.0;
        for (int64_t y = 0; y < ops[0].shape()[2]; ++y) {
          for (int64_t x = 0; x < ops[0].shape()[3]; ++x) sum += at(ops[0], {i[0], i[1], y, x});
        }
        return sum / static_cast<double>(ops[0].shape()[2] * ops[0].shape()[3]);
      });
    case OpKind::kRelu:
      return generate(out, [&](const Index& i) { return activation("relu", at(ops[0], i)); });
    case OpKind::kRelu6:
      return generate(out, [&](const Index& i) { return activation("relu6", at(ops[0], i)); });
    case OpKind::kGelu:
      return generate(out, [&](const Index& i) { return activation("gelu", at(ops[0], i)); });
    case OpKind::kTanh:
      return generate(out, [&](const Index& i) { return activation("tanh", at(ops[0], i)); });
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kPow: {
      const std::string act = attrs.get_string("act", "none");
      return generate(out, [&](const Index& i) {
        const double a = at(ops[0], broadcast_index(ops[0].shape(), i));
        const double b = at(ops[1], broadcast_index(ops[1].shape(), i));
        return activation(act, arithmetic(op, a, b));
      });
    }
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kErf:
    case OpKind::kSqrt:
    case OpKind::kClip:
      return generate(out, [&](const Index& i) { return unary_math(op, attrs, at(ops[0], i)); });
    case OpKind::kReduceMean:
      return reduce_mean(attrs, ops[0], out);
    case OpKind::kCast: {
      size_t n = 0;
      if (ops[0].dtype() == DType::kI32) {
        const auto v = ops[0].as<int32_t>();
        return generate(out, [&](const Index&) { return static_cast<double>(v[n++]); });
      }
      const auto v = ops[0].as<int64_t>();
      return generate(out, [&](const Index&) { return static_cast<double>(v[n++]); });
    }
    case OpKind::kScaleShift: {
      const std::string act = attrs.get_string("act", "none");
      return generate(out, [&](const Index& i) {
        return activation(act, at(ops[0], i) * at(ops[1], {i[1]}) + at(ops[2], {i[1]}));
      });
    }
    case OpKind::kConcat:
      return concat(attrs, ops, out);
    case OpKind::kTranspose: {
      const auto& perm = attrs.get_ints("perm");
      return generate(out, [&](const Index& i) {
        Index j(i.size());
        for (size_t d = 0; d < i.size(); ++d) j[static_cast<size_t>(perm[d])] = i[d];
        return at(ops[0], j);
      });
    }
    case OpKind::kSlice:
      return slice(attrs, ops[0], out);
    case OpKind::kGather:
      return generate(out, [&](const Index& i) {
        const Index idx(i.begin(), i.end() - 1);
        const int64_t row = ops[1].as<int64_t>()[static_cast<size_t>(flat_index(ops[1].shape(), idx))];
        return at(ops[0], {row, i.back()});
      });
    case OpKind::kLayoutToNHWC:
    case OpKind::kLayoutToNCHW:
      return generate(out, [&](const Index& i) { return at(ops[0], i); });
    case OpKind::kGemm:
      return gemm(attrs, ops, out);
    case OpKind::kMatMul:
      return matmul(attrs, ops[0], ops[1], out);
    case OpKind::kSoftmax:
      return softmax(attrs, ops[0]);
    case OpKind::kAttention:
      return attention(attrs, ops, out);
    case OpKind::kLayerNorm:
      return layer_norm(attrs, ops);
    default:
      break;
  }
  ATOLL_THROW(kUnsupported, "no reference for op {}", op_name(op));
}

double max_rel_error(const Tensor& got, const Tensor& want) {
  if (!(got.shape() == want.shape()) || got.dtype() != DType::kF32 || want.dtype() != DType::kF32) {
    return std::numeric_limits<double>::infinity();
  }
  const auto g = got.as<float>();
  const auto w = want.as<float>();
  double sq = 0.0;
  for (float v : w) sq += static_cast<double>(v) * v;
  const double rms = std::sqrt(sq / static_cast<double>(std::max<size_t>(w.size(), 1)));
  double worst = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(g[i]) && std::isfinite(w[i])) return std::numeric_limits<double>::infinity();
    const double floor = std::max(std::abs(static_cast<double>(w[i])), rms);
    const double err = std::abs(static_cast<double>(g[i]) - w[i]);
    worst = std::max(worst, floor > 0 ? err / floor : err);
  }
  return worst;
}

}  // namespace atl::opcases
