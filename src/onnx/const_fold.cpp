// Host evaluation of nodes whose inputs are all constants: the shape arithmetic exporters emit
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) and small weight preprocessing. Constants
// are f32 or i64 (see constant_dtype); integer arithmetic is exact and checked for overflow.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/error.h"
#include "onnx/import_context.h"

namespace atl::onnx_detail {

namespace {

// A folded node's result, refused before it is allocated when it would take more than `room`
// bytes (what ImportContext::account_computed has left).
Tensor make_tensor(DType dtype, const std::vector<int64_t>& dims, int64_t room) {
  const int64_t n = checked_numel(dims, "folded constant");
  const int64_t element = static_cast<int64_t>(dtype_size(dtype));
  ATOLL_CHECK(n <= room / element, kUnsupported,
              "a folded constant of {} elements would take {} MiB, more than the {} MiB left for computed constants",
              n, (n * element) >> 20, room >> 20);
  return Tensor(dtype, Shape(dims));
}

double get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.as<float>()[static_cast<size_t>(i)]
                                  : static_cast<double>(t.as<int64_t>()[static_cast<size_t>(i)]);
}

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(static_cast<size_t>(s.rank()), 1);
  for (int d = s.rank() - 1; d > 0; --d) st[static_cast<size_t>(d - 1)] = st[static_cast<size_t>(d)] * s[d];
  return st;
}

// out[i] = in[source(index of i)], element bytes copied as they are (exact for i64).
Tensor remap(int64_t room, const Tensor& in, const std::vector<int64_t>& out_dims,
             const std::function<int64_t(const std::vector<int64_t>&)>& source) {
  Tensor out = make_tensor(in.dtype(), out_dims, room);
  const size_t bytes = dtype_size(in.dtype());
  std::vector<int64_t> idx(out_dims.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::memcpy(out.raw() + static_cast<size_t>(i) * bytes, in.raw() + static_cast<size_t>(source(idx)) * bytes, bytes);
    for (size_t d = out_dims.size(); d-- > 0;) {
      if (++idx[d] < out_dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Source offset of a broadcast operand for an output index.
int64_t broadcast_offset(const Shape& s, const std::vector<int64_t>& strides, const std::vector<int64_t>& out_idx) {
  int64_t off = 0;
  const size_t lead = out_idx.size() - static_cast<size_t>(s.rank());
  for (int d = 0; d < s.rank(); ++d) {
    if (s[d] != 1) off += out_idx[lead + static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
  }
  return off;
}

int64_t int_arith(const std::string& op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "Add") overflow = __builtin_add_overflow(a, b, &r);
  if (op == "Sub") overflow = __builtin_sub_overflow(a, b, &r);
  if (op == "Mul") overflow = __builtin_mul_overflow(a, b, &r);
  if (op == "Div") {
    ATOLL_CHECK(b != 0, kUnsupported, "integer division by zero in a constant");
    overflow = a == std::numeric_limits<int64_t>::min() && b == -1;
    if (!overflow) r = a / b;
  }
  if (op == "Pow") {
    ATOLL_CHECK(b >= 0, kUnsupported, "integer power with a negative exponent in a constant");
    r = 1;
    for (int64_t k = 0; k < b && !overflow; ++k) overflow = __builtin_mul_overflow(r, a, &r);
  }
  if (op == "Equal") r = a == b;
  if (op == "Less") r = a < b;
  if (op == "Greater") r = a > b;
  ATOLL_CHECK(!overflow, kUnsupported, "integer overflow folding {}({}, {})", op, a, b);
  return r;
}

double float_arith(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Pow") return std::pow(a, b);
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  return a > b;  // Greater
}

Tensor fold_binary(int64_t room, const std::string& op, const Tensor& a, const Tensor& b) {
  const bool compare = op == "Equal" || op == "Less" || op == "Greater";
  const bool ints = a.dtype() == DType::kI64 && b.dtype() == DType::kI64;
  const auto dims = broadcast_dims(a.shape().dims(), b.shape().dims());
  Tensor out = make_tensor(ints || compare ? DType::kI64 : DType::kF32, dims, room);
  const auto sa = row_major_strides(a.shape()), sb = row_major_strides(b.shape());
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t oa = broadcast_offset(a.shape(), sa, idx), ob = broadcast_offset(b.shape(), sb, idx);
    if (ints) {
      out.as<int64_t>()[static_cast<size_t>(i)] =
          int_arith(op, a.as<int64_t>()[static_cast<size_t>(oa)], b.as<int64_t>()[static_cast<size_t>(ob)]);
    } else if (compare) {
      out.as<int64_t>()[static_cast<size_t>(i)] = static_cast<int64_t>(float_arith(op, get(a, oa), get(b, ob)));
    } else {
      out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(float_arith(op, get(a, oa), get(b, ob)));
    }
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Tensor fold_cast(const Tensor& x, int64_t to) {
  const DType dtype = constant_dtype(static_cast<int32_t>(to), "Cast target");
  if (dtype == x.dtype()) return x;
  Tensor out(dtype, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = get(x, i);
    if (dtype == DType::kF32) {
      out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(v);
    } else {
      // 2^63 is exactly representable: anything below it (and at or above -2^63) fits int64.
      ATOLL_CHECK(std::isfinite(v) && v >= -9.2233720368547758e18 && v < 9.2233720368547758e18, kUnsupported,
                  "cannot cast {} to an integer", v);
      out.as<int64_t>()[static_cast<size_t>(i)] = static_cast<int64_t>(v);
    }
  }
  return out;
}

Tensor fold_unary(const std::string& op, const Tensor& x) {
  Tensor out = x.clone();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = get(x, i);
    if (x.dtype() == DType::kI64) {
      ATOLL_CHECK(op == "Neg" && v != static_cast<double>(std::numeric_limits<int64_t>::min()), kUnsupported,
                  "cannot fold integer {}", op);
      out.as<int64_t>()[static_cast<size_t>(i)] = -x.as<int64_t>()[static_cast<size_t>(i)];
      continue;
    }
    double r = -v;
    if (op == "Sqrt") r = std::sqrt(v);
    if (op == "Reciprocal") r = 1.0 / v;
    if (op == "Erf") r = std::erf(v);
    if (op == "Relu") r = v > 0 ? v : 0.0;
    out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(r);
  }
  return out;
}

Tensor fold_gather(int64_t room, const Tensor& data, const Tensor& indices, int64_t axis_attr) {
  const int axis = normalize_axis(axis_attr, data.shape().rank());
  ATOLL_CHECK(indices.dtype() == DType::kI64, kUnsupported, "Gather indices must be integers");
  const int64_t dim = data.shape()[axis];
  std::vector<int64_t> dims;
  for (int d = 0; d < axis; ++d) dims.push_back(data.shape()[d]);
  for (int64_t d : indices.shape().dims()) dims.push_back(d);
  for (int d = axis + 1; d < data.shape().rank(); ++d) dims.push_back(data.shape()[d]);
  const auto strides = row_major_strides(data.shape());
  const auto idx_strides = row_major_strides(indices.shape());
  const int ir = indices.shape().rank();
  return remap(room, data, dims, [&](const std::vector<int64_t>& o) {
    int64_t flat = 0;
    for (int d = 0; d < ir; ++d) flat += o[static_cast<size_t>(axis + d)] * idx_strides[static_cast<size_t>(d)];
    int64_t k = indices.as<int64_t>()[static_cast<size_t>(flat)];
    ATOLL_CHECK(k >= -dim && k < dim, kUnsupported, "Gather index {} is out of range for {}", k, dim);
    if (k < 0) k += dim;
    int64_t off = k * strides[static_cast<size_t>(axis)];
    for (int d = 0; d < axis; ++d) off += o[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
    for (int d = axis + 1; d < data.shape().rank(); ++d) {
      off += o[static_cast<size_t>(d - 1 + ir)] * strides[static_cast<size_t>(d)];
    }
    return off;
  });
}

Tensor fold_gather_elements(int64_t room, const Tensor& data, const Tensor& indices, int64_t axis_attr) {
  const int rank = data.shape().rank();
  const int axis = normalize_axis(axis_attr, rank);
  ATOLL_CHECK(indices.dtype() == DType::kI64 && indices.shape().rank() == rank, kUnsupported,
              "GatherElements indices must be integers of the data's rank");
  const int64_t dim = data.shape()[axis];
  const auto strides = row_major_strides(data.shape());
  const auto idx_strides = row_major_strides(indices.shape());
  return remap(room, data, indices.shape().dims(), [&](const std::vector<int64_t>& o) {
    int64_t flat = 0, off = 0;
    for (int d = 0; d < rank; ++d) flat += o[static_cast<size_t>(d)] * idx_strides[static_cast<size_t>(d)];
    int64_t k = indices.as<int64_t>()[static_cast<size_t>(flat)];
    ATOLL_CHECK(k >= -dim && k < dim, kUnsupported, "GatherElements index {} is out of range for {}", k, dim);
    if (k < 0) k += dim;
    for (int d = 0; d < rank; ++d) {
      ATOLL_CHECK(d == axis || o[static_cast<size_t>(d)] < data.shape()[d], kUnsupported,
                  "GatherElements indices {} exceed data {}", indices.shape().str(), data.shape().str());
      off += (d == axis ? k : o[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
    }
    return off;
  });
}

Tensor fold_slice(int64_t room, const Tensor& x, const std::vector<SliceAxis>& axes) {
  std::vector<int64_t> dims = x.shape().dims(), start(dims.size(), 0), step(dims.size(), 1);
  for (const SliceAxis& a : axes) {
    dims[static_cast<size_t>(a.axis)] = a.count;
    start[static_cast<size_t>(a.axis)] = a.start;
    step[static_cast<size_t>(a.axis)] = a.step;
  }
  const auto strides = row_major_strides(x.shape());
  return remap(room, x, dims, [&](const std::vector<int64_t>& o) {
    int64_t off = 0;
    for (size_t d = 0; d < o.size(); ++d) off += (start[d] + o[d] * step[d]) * strides[d];
    return off;
  });
}

Tensor fold_concat(int64_t room, const std::vector<const Tensor*>& parts, int64_t axis_attr) {
  const Tensor& first = *parts[0];
  const int axis = normalize_axis(axis_attr, first.shape().rank());
  std::vector<int64_t> dims = first.shape().dims();
  dims[static_cast<size_t>(axis)] = 0;
  std::vector<int64_t> begin;
  for (const Tensor* p : parts) {
    ATOLL_CHECK(p->dtype() == first.dtype() && p->shape().rank() == first.shape().rank(), kUnsupported,
                "Concat inputs differ in type or rank");
    begin.push_back(dims[static_cast<size_t>(axis)]);
    dims[static_cast<size_t>(axis)] += p->shape()[axis];
  }
  Tensor out = make_tensor(first.dtype(), dims, room);
  const size_t bytes = dtype_size(first.dtype());
  for (size_t k = 0; k < parts.size(); ++k) {
    const Tensor& p = *parts[k];
    for (int d = 0; d < p.shape().rank(); ++d) {
      ATOLL_CHECK(d == axis || p.shape()[d] == first.shape()[d], kUnsupported,
                  "Concat inputs {} and {} differ off axis", p.shape().str(), first.shape().str());
    }
    const auto out_strides = row_major_strides(Shape(dims));
    std::vector<int64_t> idx(dims.size(), 0);
    for (int64_t i = 0; i < p.numel(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < dims.size(); ++d) {
        off += (idx[d] + (static_cast<int>(d) == axis ? begin[k] : 0)) * out_strides[d];
      }
      std::memcpy(out.raw() + static_cast<size_t>(off) * bytes, p.raw() + static_cast<size_t>(i) * bytes, bytes);
      for (size_t d = dims.size(); d-- > 0;) {
        if (++idx[d] < p.shape()[static_cast<int>(d)]) break;
        idx[d] = 0;
      }
    }
  }
  return out;
}

Tensor fold_where(int64_t room, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const bool ints = a.dtype() == DType::kI64 && b.dtype() == DType::kI64;
  const auto dims = broadcast_dims(broadcast_dims(cond.shape().dims(), a.shape().dims()), b.shape().dims());
  Tensor out = make_tensor(ints ? DType::kI64 : DType::kF32, dims, room);
  const auto sc = row_major_strides(cond.shape()), sa = row_major_strides(a.shape()), sb = row_major_strides(b.shape());
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const bool take_a = get(cond, broadcast_offset(cond.shape(), sc, idx)) != 0.0;
    const Tensor& src = take_a ? a : b;
    const int64_t off = broadcast_offset(src.shape(), take_a ? sa : sb, idx);
    if (ints) {
      out.as<int64_t>()[static_cast<size_t>(i)] = src.as<int64_t>()[static_cast<size_t>(off)];
    } else {
      out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(get(src, off));
    }
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Tensor fold_range(int64_t room, const Tensor& start, const Tensor& limit, const Tensor& delta) {
  const double s = get(start, 0), l = get(limit, 0), d = get(delta, 0);
  ATOLL_CHECK(d != 0 && std::isfinite(s) && std::isfinite(l) && std::isfinite(d), kUnsupported,
              "Range({}, {}, {}) is not finite", s, l, d);
  const double count = std::max(0.0, std::ceil((l - s) / d));
  ATOLL_CHECK(count <= static_cast<double>(kMaxConstantElements), kUnsupported, "Range of {} elements", count);
  ATOLL_CHECK(std::abs(s) + count * std::abs(d) < 9e18, kUnsupported, "Range({}, {}, {}) overflows", s, l, d);
  Tensor out = make_tensor(start.dtype(), {static_cast<int64_t>(count)}, room);
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (out.dtype() == DType::kF32) {
      out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(s + static_cast<double>(i) * d);
    } else {
      out.as<int64_t>()[static_cast<size_t>(i)] = start.as<int64_t>()[0] + i * delta.as<int64_t>()[0];
    }
  }
  return out;
}

Tensor fold_transpose(int64_t room, const Tensor& x, std::vector<int64_t> perm) {
  const int rank = x.shape().rank();
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  ATOLL_CHECK(static_cast<int>(perm.size()) == rank, kUnsupported, "perm has {} entries for rank {}", perm.size(),
              rank);
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(x.shape()[normalize_axis(p, rank)]);
  const auto strides = row_major_strides(x.shape());
  return remap(room, x, dims, [&](const std::vector<int64_t>& o) {
    int64_t off = 0;
    for (size_t d = 0; d < o.size(); ++d) off += o[d] * strides[static_cast<size_t>(perm[d])];
    return off;
  });
}

Tensor fold_expand(int64_t room, const Tensor& x, const std::vector<int64_t>& shape) {
  const auto dims = broadcast_dims(x.shape().dims(), shape);
  const auto strides = row_major_strides(x.shape());
  return remap(room, x, dims, [&](const std::vector<int64_t>& o) { return broadcast_offset(x.shape(), strides, o); });
}

}  // namespace

bool fold_constant_node(ImportContext& ctx, const NodeAttrs& attrs) {
  const std::string& op = ctx.node().op_type();
  auto in = [&](int i) -> const Tensor& { return ctx.constant(i); };
  auto ints = [&](int i) { return ctx.const_ints(i); };
  const int64_t room = ctx.computed_room();
  Tensor out;
  if (op == "Identity" || op == "Dropout") {
    out = in(0);
  } else if (op == "Cast") {
    out = fold_cast(in(0), attrs.get_int("to", 0));
  } else if (op == "Reshape") {
    out = in(0).reshaped(Shape(reshape_dims(in(0).shape(), ints(1), attrs.get_int("allowzero", 0) != 0)));
  } else if (op == "Flatten") {
    out = in(0).reshaped(Shape(flatten_dims(in(0).shape(), attrs.get_int("axis", 1))));
  } else if (op == "Squeeze") {
    out = in(0).reshaped(Shape(squeeze_dims(in(0).shape(), ctx.const_ints(1))));
  } else if (op == "Unsqueeze") {
    out = in(0).reshaped(Shape(unsqueeze_dims(in(0).shape(), ints(1))));
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Equal" ||
             op == "Less" || op == "Greater") {
    out = fold_binary(room, op, in(0), in(1));
  } else if (op == "Neg" || op == "Sqrt" || op == "Reciprocal" || op == "Erf" || op == "Relu") {
    out = fold_unary(op, in(0));
  } else if (op == "Not") {
    out = fold_binary(room, "Equal", in(0), Tensor(DType::kI64, Shape{}));
  } else if (op == "Gather") {
    out = fold_gather(room, in(0), in(1), attrs.get_int("axis", 0));
  } else if (op == "GatherElements") {
    out = fold_gather_elements(room, in(0), in(1), attrs.get_int("axis", 0));
  } else if (op == "Slice") {
    out = fold_slice(room, in(0), slice_axes(in(0).shape(), ints(1), ints(2), ctx.const_ints(3), ctx.const_ints(4)));
  } else if (op == "Concat") {
    std::vector<const Tensor*> parts;
    for (int i = 0; i < ctx.num_inputs(); ++i) parts.push_back(&in(i));
    ATOLL_CHECK(!parts.empty(), kUnsupported, "Concat of nothing");
    out = fold_concat(room, parts, attrs.get_int("axis", 0));
  } else if (op == "Where") {
    out = fold_where(room, in(0), in(1), in(2));
  } else if (op == "Range") {
    out = fold_range(room, in(0), in(1), in(2));
  } else if (op == "Transpose") {
    out = fold_transpose(room, in(0), attrs.get_ints("perm", {}));
  } else if (op == "Expand") {
    out = fold_expand(room, in(0), ints(1));
  } else {
    return false;
  }
  // A view of its input (Identity, the reshapes) shares the input's bytes and costs nothing new.
  const bool view = ctx.has_input(0) && out.raw() == in(0).raw();
  if (!view) ctx.account_computed(static_cast<int64_t>(out.nbytes()), fmt::format("{} '{}'", op, ctx.output_base()));
  ctx.set_output_const(0, std::move(out));
  return true;
}

}  // namespace atl::onnx_detail
