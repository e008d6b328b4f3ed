// Elementwise ONNX ops: arithmetic with broadcasting, activations, Clip, Cast, Identity/Dropout.
// Division and subtraction by constants become Mul/Add, which every backend runs.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "onnx/import_context.h"

namespace atl::onnx_detail {

namespace {

void expect_float_input(ImportContext& ctx, int i) {
  ATOLL_CHECK(is_float(ctx.dtype(i)), kUnsupported, "input '{}' is {}; this op runs on floating point only",
              ctx.node().input(i), dtype_name(ctx.dtype(i)));
}

// A constant with every element mapped by f (as f32).
template <typename F>
Tensor map_constant(const Tensor& t, F f) {
  Tensor out(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.dtype() == DType::kF32 ? t.as<float>()[static_cast<size_t>(i)]
                                              : static_cast<double>(t.as<int64_t>()[static_cast<size_t>(i)]);
    out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(f(v));
  }
  return out;
}

std::optional<double> scalar_constant(ImportContext& ctx, int i) {
  if (!ctx.is_const(i) || ctx.constant(i).numel() != 1) return std::nullopt;
  const Tensor& t = ctx.constant(i);
  return t.dtype() == DType::kF32 ? t.as<float>()[0] : static_cast<double>(t.as<int64_t>()[0]);
}

// A constant operand that stays a weight must be f32 like the activation it meets.
ValueId float_operand(ImportContext& ctx, int i, const std::string& suffix) {
  if (ctx.is_const(i) && ctx.constant(i).dtype() != DType::kF32) {
    return ctx.add_weight(suffix, map_constant(ctx.constant(i), [](double v) { return v; }));
  }
  return ctx.value(i);
}

void import_binary(ImportContext& ctx, const NodeAttrs&) {
  const std::string& op = ctx.node().op_type();
  expect_float_input(ctx, 0);
  expect_float_input(ctx, 1);
  if (ctx.is_const(1) && (op == "Sub" || op == "Div")) {  // x - c = x + (-c); x / c = x * (1 / c)
    const Tensor folded = op == "Sub" ? map_constant(ctx.constant(1), [](double v) { return -v; })
                                      : map_constant(ctx.constant(1), [](double v) { return 1.0 / v; });
    const ValueId c = ctx.add_weight(op == "Sub" ? "#negated" : "#reciprocal", folded);
    ctx.set_output(0, ctx.add(op == "Sub" ? OpKind::kAdd : OpKind::kMul, {ctx.value(0), c}));
    return;
  }
  if (op == "Pow" && scalar_constant(ctx, 1) == 2.0) {  // x^2 as a product: every backend runs Mul
    const ValueId x = ctx.value(0);
    ctx.set_output(0, ctx.add(OpKind::kMul, {x, x}));
    return;
  }
  const OpKind kind = op == "Add" ? OpKind::kAdd : op == "Sub" ? OpKind::kSub : op == "Mul" ? OpKind::kMul
                      : op == "Div" ? OpKind::kDiv : OpKind::kPow;
  ctx.set_output(0, ctx.add(kind, {float_operand(ctx, 0, "#a"), float_operand(ctx, 1, "#b")}));
}

void import_unary(ImportContext& ctx, const NodeAttrs& attrs) {
  const std::string& op = ctx.node().op_type();
  expect_float_input(ctx, 0);
  const ValueId x = ctx.value(0);
  if (op == "Reciprocal") {
    const ValueId one = ctx.add_weight("#one", map_constant(Tensor(DType::kF32, Shape{1}), [](double) { return 1.0; }));
    ctx.set_output(0, ctx.add(OpKind::kDiv, {one, x}));
    return;
  }
  if (op == "Neg") {
    const ValueId minus_one = ctx.add_weight("#minus_one", map_constant(Tensor(DType::kF32, Shape{1}), [](double) {
                                               return -1.0;
                                             }));
    ctx.set_output(0, ctx.add(OpKind::kMul, {x, minus_one}));
    return;
  }
  if (op == "Gelu") {
    const std::string approximate = attrs.get_string("approximate", "none");
    ATOLL_CHECK(approximate == "none", kUnsupported, "approximate='{}' is not supported (only the exact GELU)",
                approximate);
    ctx.set_output(0, ctx.add(OpKind::kGelu, {x}));
    return;
  }
  Attrs a;
  OpKind kind = OpKind::kRelu;
  if (op == "Tanh") kind = OpKind::kTanh;
  if (op == "Sigmoid") kind = OpKind::kSigmoid;
  if (op == "Erf") kind = OpKind::kErf;
  if (op == "Sqrt") kind = OpKind::kSqrt;
  if (op == "HardSwish") kind = OpKind::kHardSwish;
  if (op == "HardSigmoid") {
    kind = OpKind::kHardSigmoid;
    a = Attrs{{"alpha", static_cast<double>(attrs.get_float("alpha", 0.2f))},
              {"beta", static_cast<double>(attrs.get_float("beta", 0.5f))}};
  }
  ctx.set_output(0, ctx.add(kind, {x}, a));
}

// Clip(0, 6) and Clip(0, inf) are the zoo's Relu6 and Relu, which fuse into conv/gemm epilogues.
void import_clip(ImportContext& ctx, const NodeAttrs&) {
  expect_float_input(ctx, 0);
  const double inf = std::numeric_limits<double>::infinity();
  auto bound = [&](int i, double def) {
    if (!ctx.has_input(i)) return def;
    const auto v = scalar_constant(ctx, i);
    ATOLL_CHECK(v.has_value(), kUnsupported, "bound '{}' must be a constant scalar", ctx.node().input(i));
    return *v;
  };
  const double lo = bound(1, -inf), hi = bound(2, inf);
  const ValueId x = ctx.value(0);
  if (lo == 0.0 && hi == 6.0) return ctx.set_output(0, ctx.add(OpKind::kRelu6, {x}));
  if (lo == 0.0 && hi == inf) return ctx.set_output(0, ctx.add(OpKind::kRelu, {x}));
  Attrs a;
  if (lo > -inf) a.set("min", lo);
  if (hi < inf) a.set("max", hi);
  ctx.set_output(0, ctx.add(OpKind::kClip, {x}, a));
}

// Identity and Dropout (inference) pass their input on; no kernel is needed.
void import_identity(ImportContext& ctx, const NodeAttrs&) {
  ATOLL_CHECK(!ctx.output_used(1), kUnsupported, "the dropout mask output is not supported");
  ctx.set_output(0, ctx.value(0));
}

void import_cast(ImportContext& ctx, const NodeAttrs& attrs) {
  const int32_t to = static_cast<int32_t>(attrs.get_int("to", 0));
  const auto target = input_dtype(to);
  ATOLL_CHECK(target.has_value(), kUnsupported, "casting to {} is not supported", onnx_type_name(to));
  const DType from = ctx.dtype(0);
  const ValueId x = ctx.value(0);
  if (is_float(from) == is_float(*target)) {  // f16 <-> f32 and i32 <-> i64 keep values: no kernel
    ctx.set_output(0, x);
    return;
  }
  const DType stored = *target == DType::kF16 ? DType::kF32 : *target;
  ctx.set_output(0, ctx.add(OpKind::kCast, {x}, {{"to", std::string(dtype_name(stored))}}));
}

void import_where(ImportContext&, const NodeAttrs&) {
  ATOLL_THROW(kUnsupported,
              "Where is supported only when its condition and both branches fold to constants at import "
              "(the IR has no boolean tensors)");
}

}  // namespace

void register_math_importers(std::map<std::string, OpImporter>& table) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"}) table[op] = import_binary;
  for (const char* op :
       {"Relu", "Tanh", "Sigmoid", "Erf", "Sqrt", "HardSigmoid", "HardSwish", "Neg", "Reciprocal", "Gelu"}) {
    table[op] = import_unary;
  }
  table["Clip"] = import_clip;
  table["Identity"] = import_identity;
  table["Dropout"] = import_identity;
  table["Cast"] = import_cast;
  table["Where"] = import_where;
}

}  // namespace atl::onnx_detail
