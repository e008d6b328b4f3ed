// Network ONNX ops: Conv, BatchNormalization, pools, Gemm, MatMul, Softmax, LayerNormalization,
// ReduceMean. Parameters that the IR folds or reorders (conv weights, BatchNorm statistics,
// Gemm matrices) must be constants.
#include <cmath>

#include "core/error.h"
#include "onnx/import_context.h"

namespace atl::onnx_detail {

namespace {

using Ints = std::vector<int64_t>;

void expect_image(ImportContext& ctx) {
  ATOLL_CHECK(ctx.shape(0).rank() == 4, kUnsupported, "only 2-D images (NCHW, rank 4) are supported, input is {}",
              ctx.shape(0).str());
  ATOLL_CHECK(is_float(ctx.dtype(0)), kUnsupported, "input must be floating point");
}

// ONNX pads [top, left, bottom, right] for the output size ONNX's auto_pad asks for.
Ints window_pads(const NodeAttrs& attrs, const Shape& x, const Ints& kernel, const Ints& strides, const Ints& dil) {
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    Ints pads = attrs.get_ints("pads", {0, 0, 0, 0});
    ATOLL_CHECK(pads.size() == 4, kUnsupported, "pads must have 4 entries for 2-D, has {}", pads.size());
    return pads;
  }
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  ATOLL_CHECK(auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", kUnsupported, "auto_pad '{}' is unknown", auto_pad);
  Ints pads(4, 0);
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x[2 + d], s = strides[static_cast<size_t>(d)];
    const int64_t out = (in + s - 1) / s;
    const int64_t eff = (kernel[static_cast<size_t>(d)] - 1) * dil[static_cast<size_t>(d)] + 1;
    const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
    const int64_t small = total / 2, large = total - small;
    pads[static_cast<size_t>(d)] = auto_pad == "SAME_UPPER" ? small : large;
    pads[static_cast<size_t>(d + 2)] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

Ints two(const NodeAttrs& attrs, const std::string& name) {
  Ints v = attrs.get_ints(name, {1, 1});
  ATOLL_CHECK(v.size() == 2, kUnsupported, "{} must have 2 entries for 2-D, has {}", name, v.size());
  return v;
}

void import_conv(ImportContext& ctx, const NodeAttrs& attrs) {
  expect_image(ctx);
  const Tensor& w = ctx.constant(1);
  ATOLL_CHECK(w.shape().rank() == 4 && w.dtype() == DType::kF32, kUnsupported, "weight must be f32 [O, I/g, kh, kw]");
  const Ints strides = two(attrs, "strides"), dil = two(attrs, "dilations");
  const Ints kernel{w.shape()[2], w.shape()[3]};
  const Ints pads = window_pads(attrs, ctx.shape(0), kernel, strides, dil);
  std::vector<ValueId> in{ctx.value(0), ctx.value(1)};
  if (ctx.has_input(2)) in.push_back(ctx.value(2));
  Attrs a{{"stride", strides}, {"pads", pads}, {"dilation", dil}, {"group", attrs.get_int("group", 1)},
          {"bias", int64_t{ctx.has_input(2)}}};
  ctx.set_output(0, ctx.add(OpKind::kConv2d, in, a));
}

void import_batch_norm(ImportContext& ctx, const NodeAttrs& attrs) {
  ATOLL_CHECK(attrs.get_int("training_mode", 0) == 0, kUnsupported, "training mode is not supported");
  for (int i = 1; i <= 4; ++i) {  // scale, bias, mean and variance fold into the conv
    ATOLL_CHECK(ctx.constant(i).dtype() == DType::kF32, kUnsupported, "'{}' must be floating point",
                ctx.node().input(i));
  }
  std::vector<ValueId> in;
  for (int i = 0; i <= 4; ++i) in.push_back(ctx.value(i));
  ctx.set_output(
      0, ctx.add(OpKind::kBatchNorm, in, {{"epsilon", static_cast<double>(attrs.get_float("epsilon", 1e-5f))}}));
}

void import_pool(ImportContext& ctx, const NodeAttrs& attrs) {
  expect_image(ctx);
  const bool max = ctx.node().op_type() == "MaxPool";
  ATOLL_CHECK(!ctx.output_used(1), kUnsupported, "the Indices output is not supported");
  const Ints kernel = attrs.get_ints("kernel_shape", {});
  ATOLL_CHECK(kernel.size() == 2, kUnsupported, "kernel_shape must have 2 entries for 2-D");
  const Ints strides = two(attrs, "strides"), dil = two(attrs, "dilations");
  ATOLL_CHECK(dil == Ints({1, 1}), kUnsupported, "dilated pooling is not supported");
  ATOLL_CHECK(attrs.get_int("storage_order", 0) == 0, kUnsupported, "storage_order 1 is not supported");
  Attrs a{{"kernel", kernel},
          {"stride", strides},
          {"pads", window_pads(attrs, ctx.shape(0), kernel, strides, dil)},
          {"ceil_mode", attrs.get_int("ceil_mode", 0)}};
  if (!max) a.set("count_include_pad", attrs.get_int("count_include_pad", 0));
  ctx.set_output(0, ctx.add(max ? OpKind::kMaxPool : OpKind::kAvgPool, {ctx.value(0)}, a));
}

void import_global_avg_pool(ImportContext& ctx, const NodeAttrs&) {
  expect_image(ctx);
  ctx.set_output(0, ctx.add(OpKind::kGlobalAvgPool, {ctx.value(0)}));
}

// A [K, N] constant as the IR's Gemm weight [N, K], scaled.
Tensor transposed_weight(const Tensor& b, bool already_nk, double alpha) {
  const int64_t rows = b.shape()[0], cols = b.shape()[1];
  Tensor w(DType::kF32, already_nk ? b.shape() : Shape{cols, rows});
  const auto src = b.as<float>();
  auto dst = w.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const size_t to = static_cast<size_t>(already_nk ? r * cols + c : c * rows + r);
      dst[to] = static_cast<float>(alpha * src[static_cast<size_t>(r * cols + c)]);
    }
  }
  return w;
}

void import_gemm(ImportContext& ctx, const NodeAttrs& attrs) {
  const double alpha = attrs.get_float("alpha", 1.0f), beta = attrs.get_float("beta", 1.0f);
  const bool trans_a = attrs.get_int("transA", 0) != 0, trans_b = attrs.get_int("transB", 0) != 0;
  ATOLL_CHECK(ctx.is_const(1) && ctx.constant(1).shape().rank() == 2 && ctx.constant(1).dtype() == DType::kF32,
              kUnsupported, "B must be a constant f32 matrix");
  ValueId a = ctx.value(0);
  if (trans_a) a = ctx.add(OpKind::kTranspose, {a}, {{"perm", Ints{1, 0}}}, "#a_t");
  const ValueId w = ctx.add_weight("#weight", transposed_weight(ctx.constant(1), trans_b, alpha));
  const int64_t n = ctx.graph().value(w).shape[0];
  std::vector<ValueId> in{a, w};
  bool bias = false;
  if (ctx.has_input(2)) {
    ATOLL_CHECK(ctx.is_const(2), kUnsupported, "C must be a constant");
    const Tensor& c = ctx.constant(2);
    if (c.numel() == n && (c.shape().rank() == 1 || c.shape()[0] == 1)) {
      Tensor scaled(DType::kF32, Shape{n});
      for (int64_t i = 0; i < n; ++i) {
        const double v = c.dtype() == DType::kF32 ? c.as<float>()[static_cast<size_t>(i)]
                                                  : static_cast<double>(c.as<int64_t>()[static_cast<size_t>(i)]);
        scaled.as<float>()[static_cast<size_t>(i)] = static_cast<float>(beta * v);
      }
      in.push_back(ctx.add_weight("#bias", scaled));
      bias = true;
    } else {
      ATOLL_CHECK(beta == 1.0, kUnsupported, "a C of shape {} with beta {} is not supported", c.shape().str(), beta);
    }
  }
  const std::string suffix = ctx.has_input(2) && !bias ? "#product" : "";
  ValueId y = ctx.add(OpKind::kGemm, in, {{"bias", int64_t{bias}}}, suffix);
  if (ctx.has_input(2) && !bias) y = ctx.add(OpKind::kAdd, {y, ctx.value(2)});
  ctx.set_output(0, y);
}

void import_matmul(ImportContext& ctx, const NodeAttrs&) {
  const Shape a = ctx.shape(0), b = ctx.shape(1);
  ATOLL_CHECK(is_float(ctx.dtype(0)) && is_float(ctx.dtype(1)), kUnsupported, "operands must be floating point");
  ATOLL_CHECK(a.rank() >= 2 && b.rank() >= 2, kUnsupported, "1-D operands are not supported: {} x {}", a.str(),
              b.str());
  if (ctx.is_const(1) && b.rank() == 2) {  // activations x weight: the IR's Gemm with w = B^T
    const ValueId w = ctx.add_weight("#weight", transposed_weight(ctx.constant(1), false, 1.0));
    ctx.set_output(0, ctx.add(OpKind::kGemm, {ctx.value(0), w}, {{"bias", int64_t{0}}}));
    return;
  }
  ATOLL_CHECK(a.rank() == b.rank(), kUnsupported, "batched operands must have equal ranks: {} x {}", a.str(), b.str());
  for (int d = 0; d + 2 < a.rank(); ++d) {
    ATOLL_CHECK(a[d] == b[d], kUnsupported, "broadcast batch dimensions are not supported: {} x {}", a.str(), b.str());
  }
  ctx.set_output(0, ctx.add(OpKind::kMatMul, {ctx.value(0), ctx.value(1)}));
}

void import_softmax(ImportContext& ctx, const NodeAttrs& attrs) {
  ATOLL_CHECK(is_float(ctx.dtype(0)), kUnsupported, "input must be floating point");
  const int axis = normalize_axis(attrs.get_int("axis", -1), ctx.shape(0).rank());
  ctx.set_output(0, ctx.add(OpKind::kSoftmax, {ctx.value(0)}, {{"axis", int64_t{axis}}}));
}

// Normalization over the trailing axes from `axis` on: the IR normalizes the last axis, so other
// axes flatten into one around it.
void import_layer_norm(ImportContext& ctx, const NodeAttrs& attrs) {
  const Shape x = ctx.shape(0);
  ATOLL_CHECK(x.rank() >= 1 && is_float(ctx.dtype(0)), kUnsupported, "input must be floating point of rank >= 1");
  ATOLL_CHECK(!ctx.output_used(1) && !ctx.output_used(2), kUnsupported,
              "the Mean and InvStdDev outputs are not supported");
  const int axis = normalize_axis(attrs.get_int("axis", -1), x.rank());
  int64_t d = 1;
  for (int i = axis; i < x.rank(); ++i) d *= x[i];
  auto param = [&](int i, float fill, const char* suffix) {
    if (!ctx.has_input(i)) {
      ctx.check_room(d * static_cast<int64_t>(sizeof(float)), suffix);
      Tensor t(DType::kF32, Shape{d});
      for (float& v : t.as<float>()) v = fill;
      return ctx.add_weight(suffix, t);
    }
    ATOLL_CHECK(ctx.shape(i).numel() == d, kUnsupported, "scale and bias must have {} elements, '{}' has {}", d,
                ctx.node().input(i), ctx.shape(i).str());
    if (ctx.shape(i).rank() == 1) return ctx.value(i);
    return ctx.add(OpKind::kReshape, {ctx.value(i)}, {{"shape", Ints{d}}}, suffix);
  };
  const ValueId gamma = param(1, 1.0f, "#scale"), beta = param(2, 0.0f, "#bias");
  const Attrs eps{{"epsilon", static_cast<double>(attrs.get_float("epsilon", 1e-5f))}};
  if (axis == x.rank() - 1) {
    ctx.set_output(0, ctx.add(OpKind::kLayerNorm, {ctx.value(0), gamma, beta}, eps));
    return;
  }
  Ints rows(x.dims().begin(), x.dims().begin() + axis);
  rows.push_back(d);
  const ValueId flat = ctx.add(OpKind::kReshape, {ctx.value(0)}, {{"shape", rows}}, "#rows");
  const ValueId norm = ctx.add(OpKind::kLayerNorm, {flat, gamma, beta}, eps, "#norm");
  ctx.set_output(0, ctx.add(OpKind::kReshape, {norm}, {{"shape", x.dims()}}));
}

void import_reduce_mean(ImportContext& ctx, const NodeAttrs& attrs) {
  ATOLL_CHECK(is_float(ctx.dtype(0)), kUnsupported, "input must be floating point");
  const Shape x = ctx.shape(0);
  const Ints given = ctx.opset() >= 18 ? ctx.const_ints(1) : attrs.get_ints("axes", {});
  const bool keep = attrs.get_int("keepdims", 1) != 0;
  if (given.empty() && attrs.get_int("noop_with_empty_axes", 0) != 0) {
    ctx.set_output(0, ctx.value(0));
    return;
  }
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), given.empty());
  for (int64_t a : given) reduced[static_cast<size_t>(normalize_axis(a, x.rank()))] = true;
  Ints axes;
  for (int d = 0; d < x.rank(); ++d) {
    if (reduced[static_cast<size_t>(d)]) axes.push_back(d);
  }
  if (x.rank() == 4 && axes == Ints({2, 3}) && keep) {  // a global average pool: every backend runs it
    ctx.set_output(0, ctx.add(OpKind::kGlobalAvgPool, {ctx.value(0)}));
    return;
  }
  ctx.set_output(0, ctx.add(OpKind::kReduceMean, {ctx.value(0)}, {{"axes", axes}, {"keepdims", int64_t{keep}}}));
}

}  // namespace

void register_nn_importers(std::map<std::string, OpImporter>& table) {
  table["Conv"] = import_conv;
  table["BatchNormalization"] = import_batch_norm;
  table["MaxPool"] = import_pool;
  table["AveragePool"] = import_pool;
  table["GlobalAveragePool"] = import_global_avg_pool;
  table["Gemm"] = import_gemm;
  table["MatMul"] = import_matmul;
  table["Softmax"] = import_softmax;
  table["LayerNormalization"] = import_layer_norm;
  table["ReduceMean"] = import_reduce_mean;
}

}  // namespace atl::onnx_detail
