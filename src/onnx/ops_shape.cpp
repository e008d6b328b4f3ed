// Shape and data-movement ONNX ops. Shapes are static, so Shape/Size/Constant/ConstantOfShape
// always fold, and Reshape/Flatten/Squeeze/Unsqueeze become one IR Reshape of a known shape.
#include "core/error.h"
#include "onnx/import_context.h"

namespace atl::onnx_detail {

namespace {

using Ints = std::vector<int64_t>;

void reshape_to(ImportContext& ctx, const Ints& dims) {
  const ValueId x = ctx.value(0);
  if (ctx.graph().value(x).shape == Shape(dims)) {
    ctx.set_output(0, x);
    return;
  }
  ctx.set_output(0, ctx.add(OpKind::kReshape, {x}, {{"shape", dims}}));
}

void import_reshape(ImportContext& ctx, const NodeAttrs& attrs) {
  reshape_to(ctx, reshape_dims(ctx.shape(0), ctx.const_ints(1), attrs.get_int("allowzero", 0) != 0));
}

void import_flatten(ImportContext& ctx, const NodeAttrs& attrs) {
  reshape_to(ctx, flatten_dims(ctx.shape(0), attrs.get_int("axis", 1)));
}

void import_squeeze(ImportContext& ctx, const NodeAttrs&) {
  reshape_to(ctx, squeeze_dims(ctx.shape(0), ctx.const_ints(1)));
}

void import_unsqueeze(ImportContext& ctx, const NodeAttrs&) {
  reshape_to(ctx, unsqueeze_dims(ctx.shape(0), ctx.const_ints(1)));
}

void import_transpose(ImportContext& ctx, const NodeAttrs& attrs) {
  const int rank = ctx.shape(0).rank();
  Ints perm = attrs.get_ints("perm", {});
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  ctx.set_output(0, ctx.add(OpKind::kTranspose, {ctx.value(0)}, {{"perm", perm}}));
}

void import_concat(ImportContext& ctx, const NodeAttrs& attrs) {
  std::vector<ValueId> in;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ATOLL_CHECK(is_float(ctx.dtype(i)), kUnsupported, "input '{}' is {}; Concat of computed values runs on floats",
                ctx.node().input(i), dtype_name(ctx.dtype(i)));
    if (ctx.shape(i).numel() > 0) in.push_back(ctx.value(i));
  }
  ATOLL_CHECK(!in.empty(), kUnsupported, "every input is empty");
  if (in.size() == 1) return ctx.set_output(0, in[0]);
  ctx.set_output(0, ctx.add(OpKind::kConcat, in, {{"axis", attrs.get_int("axis", 0)}}));
}

// An IR Slice (positive steps) of input 0, followed by a Reshape when `squeezed` drops axes.
ValueId slice_value(ImportContext& ctx, const std::vector<SliceAxis>& axes, const std::string& suffix) {
  Ints ax, starts, ends, steps;
  for (const SliceAxis& a : axes) {
    ATOLL_CHECK(a.step > 0, kUnsupported, "negative slice steps are not supported on computed values");
    ATOLL_CHECK(a.count > 0, kUnsupported, "the slice on axis {} is empty", a.axis);
    ax.push_back(a.axis);
    starts.push_back(a.start);
    ends.push_back(a.start + (a.count - 1) * a.step + 1);
    steps.push_back(a.step);
  }
  return ctx.add(OpKind::kSlice, {ctx.value(0)}, {{"axes", ax}, {"starts", starts}, {"ends", ends}, {"steps", steps}},
                 suffix);
}

void import_slice(ImportContext& ctx, const NodeAttrs&) {
  const auto axes =
      slice_axes(ctx.shape(0), ctx.const_ints(1), ctx.const_ints(2), ctx.const_ints(3), ctx.const_ints(4));
  ctx.set_output(0, slice_value(ctx, axes, ""));
}

// Gather of computed data at constant indices is a slice (a scalar index drops the axis); a
// constant table [V, D] indexed along axis 0 by computed integers is an embedding lookup.
void import_gather(ImportContext& ctx, const NodeAttrs& attrs) {
  const Shape data = ctx.shape(0);
  const int axis = normalize_axis(attrs.get_int("axis", 0), data.rank());
  if (ctx.is_const(1)) {
    const Ints idx = ctx.const_ints(1);
    const int64_t dim = data[axis];
    ATOLL_CHECK(ctx.constant(1).shape().rank() <= 1 && !idx.empty(), kUnsupported,
                "constant indices must be a scalar or a 1-D list");
    auto norm = [&](int64_t k) {
      ATOLL_CHECK(k >= -dim && k < dim, kUnsupported, "index {} is out of range for {}", k, dim);
      return k < 0 ? k + dim : k;
    };
    for (size_t i = 1; i < idx.size(); ++i) {
      ATOLL_CHECK(norm(idx[i]) == norm(idx[i - 1]) + 1, kUnsupported,
                  "constant indices must be consecutive (a slice) on computed data");
    }
    const SliceAxis s{axis, norm(idx[0]), 1, static_cast<int64_t>(idx.size())};
    const bool scalar = ctx.constant(1).shape().rank() == 0;
    const ValueId sliced = slice_value(ctx, {s}, scalar ? "#slice" : "");
    if (!scalar) return ctx.set_output(0, sliced);
    Ints dims = data.dims();
    dims.erase(dims.begin() + axis);
    ctx.set_output(0, ctx.add(OpKind::kReshape, {sliced}, {{"shape", dims}}));
    return;
  }
  ATOLL_CHECK(ctx.is_const(0) && data.rank() == 2 && axis == 0, kUnsupported,
              "computed indices are supported only into a constant table [V, D] along axis 0 (an embedding)");
  ATOLL_CHECK(ctx.dtype(1) == DType::kI64 || ctx.dtype(1) == DType::kI32, kUnsupported, "indices must be integers");
  ctx.set_output(0, ctx.add(OpKind::kGather, {ctx.value(0), ctx.value(1)}));
}

// Expand of a computed value: adding zeros of the target shape broadcasts it.
void import_expand(ImportContext& ctx, const NodeAttrs&) {
  ATOLL_CHECK(is_float(ctx.dtype(0)), kUnsupported, "only floating-point values can be expanded");
  const Ints target = ctx.const_ints(1);
  const Ints out = broadcast_dims(ctx.shape(0).dims(), target);
  const ValueId x = ctx.value(0);
  if (Shape(out) == ctx.shape(0)) return ctx.set_output(0, x);
  Ints zeros_dims = target;
  for (int64_t& d : zeros_dims) d = d < 1 ? 1 : d;
  ctx.check_room(checked_numel(zeros_dims, "Expand target") * static_cast<int64_t>(sizeof(float)), "Expand target");
  const ValueId zeros = ctx.add_weight("#zeros", Tensor(DType::kF32, Shape(zeros_dims)));
  ctx.set_output(0, ctx.add(OpKind::kAdd, {x, zeros}));
}

Tensor int_vector(const Ints& v) {
  Tensor t(DType::kI64, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

void import_shape(ImportContext& ctx, const NodeAttrs& attrs) {
  const Ints dims = ctx.shape(0).dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(attrs.get_int("start", 0)), end = clamp(attrs.get_int("end", rank));
  const Ints part = start < end ? Ints(dims.begin() + start, dims.begin() + end) : Ints{};
  ctx.set_output_const(0, int_vector(part));
}

void import_size(ImportContext& ctx, const NodeAttrs&) {
  Tensor t(DType::kI64, Shape{});
  t.as<int64_t>()[0] = ctx.shape(0).numel();
  ctx.set_output_const(0, t);
}

void import_constant(ImportContext& ctx, const NodeAttrs& attrs) {
  if (const auto* t = attrs.get_tensor("value")) return ctx.set_output_const(0, tensor_from_proto(*t, ctx.model_dir()));
  if (attrs.has("value_int")) {
    Tensor t(DType::kI64, Shape{});
    t.as<int64_t>()[0] = attrs.get_int("value_int", 0);
    return ctx.set_output_const(0, t);
  }
  if (attrs.has("value_ints")) return ctx.set_output_const(0, int_vector(attrs.get_ints("value_ints", {})));
  if (attrs.has("value_float")) {
    Tensor t(DType::kF32, Shape{});
    t.as<float>()[0] = attrs.get_float("value_float", 0.0f);
    return ctx.set_output_const(0, t);
  }
  if (attrs.has("value_floats")) {
    const std::vector<float> v = attrs.get_floats("value_floats");
    Tensor t(DType::kF32, Shape{static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.as<float>().begin());
    return ctx.set_output_const(0, t);
  }
  ATOLL_THROW(kUnsupported, "only tensor, int and float values are supported (sparse and string ones are not)");
}

void import_constant_of_shape(ImportContext& ctx, const NodeAttrs& attrs) {
  const Ints dims = ctx.const_ints(0);
  const int64_t n = checked_numel(dims, "ConstantOfShape");
  Tensor fill(DType::kF32, Shape{1});
  if (const auto* t = attrs.get_tensor("value")) fill = tensor_from_proto(*t, ctx.model_dir());
  ATOLL_CHECK(fill.numel() == 1, kUnsupported, "value must hold one element");
  ctx.account_computed(n * static_cast<int64_t>(dtype_size(fill.dtype())), "ConstantOfShape");
  Tensor out(fill.dtype(), Shape(dims));
  const size_t bytes = dtype_size(fill.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(out.raw() + static_cast<size_t>(i) * bytes, fill.raw(), bytes);
  ctx.set_output_const(0, out);
}

}  // namespace

void register_shape_importers(std::map<std::string, OpImporter>& table) {
  table["Reshape"] = import_reshape;
  table["Flatten"] = import_flatten;
  table["Squeeze"] = import_squeeze;
  table["Unsqueeze"] = import_unsqueeze;
  table["Transpose"] = import_transpose;
  table["Concat"] = import_concat;
  table["Slice"] = import_slice;
  table["Gather"] = import_gather;
  table["Expand"] = import_expand;
  table["Shape"] = import_shape;
  table["Size"] = import_size;
  table["Constant"] = import_constant;
  table["ConstantOfShape"] = import_constant_of_shape;
}

}  // namespace atl::onnx_detail
