// Entry points of the memory-bound families: pooling, activations and unary math, Add / Sub /
// Mul / Div / Pow, ScaleShift, Softmax and LayerNorm.
#include <limits>
#include <vector>

#include "backends/cuda/launch.h"
#include "core/error.h"
#include "ir/op_attrs.h"

namespace atl::cuda {

namespace {

int to_int(int64_t v) {
  ATOLL_CHECK(v >= 0 && v <= INT32_MAX, kUnsupported, "dimension {} exceeds the 32-bit range", v);
  return static_cast<int>(v);
}

int64_t product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; ++d) p *= s[d];
  return p;
}

int binary_code(OpKind op) {
  switch (op) {
    case OpKind::kAdd: return kBinaryAdd;
    case OpKind::kSub: return kBinarySub;
    case OpKind::kMul: return kBinaryMul;
    case OpKind::kDiv: return kBinaryDiv;
    case OpKind::kPow: return kBinaryPow;
    default: ATOLL_THROW(kInternal, "{} is not a binary arithmetic op", op_name(op));
  }
}

}  // namespace

std::unique_ptr<KernelLaunch> prepare_pool(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const Binding& xb = k.inputs[0];
  const Binding& yb = k.outputs[0];
  expect_layout(xb, Layout::kNHWC, "input");
  expect_layout(yb, Layout::kNHWC, "output");
  const PoolParams pp = pool_params(k.attrs);
  PoolArgs p;
  p.x = half_in(k, ctx, 0, "input");
  p.y = half_out(k, ctx, 0);
  p.n = to_int(xb.shape[0]);
  p.c = to_int(xb.shape[1]);
  p.h = to_int(xb.shape[2]);
  p.w = to_int(xb.shape[3]);
  p.kh = to_int(pp.k_h);
  p.kw = to_int(pp.k_w);
  p.stride_h = to_int(pp.stride_h);
  p.stride_w = to_int(pp.stride_w);
  p.pad_t = to_int(pp.pad_t);
  p.pad_l = to_int(pp.pad_l);
  p.out_h = to_int(yb.shape[2]);
  p.out_w = to_int(yb.shape[3]);
  p.is_max = k.op == OpKind::kMaxPool;
  p.count_include_pad = pp.count_include_pad;
  return make_param_launch(k, p, launch_pool, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_global_avg_pool(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const Binding& xb = k.inputs[0];
  expect_layout(xb, Layout::kNHWC, "input");
  // [N, C, 1, 1] has the same bytes in either layout.
  GlobalPoolArgs p;
  p.x = half_in(k, ctx, 0, "input");
  p.y = half_out(k, ctx, 0);
  p.n = to_int(xb.shape[0]);
  p.c = to_int(xb.shape[1]);
  p.hw = to_int(xb.shape[2] * xb.shape[3]);
  return make_param_launch(k, p, launch_global_avg_pool, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_unary(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  ATOLL_CHECK(k.inputs[0].layout == k.outputs[0].layout, kUnsupported, "input and output layouts differ");
  ATOLL_CHECK(k.inputs[0].shape == k.outputs[0].shape, kUnsupported, "input {} and output {} differ in shape",
              k.inputs[0].shape.str(), k.outputs[0].shape.str());
  UnaryArgs p;
  p.x = half_in(k, ctx, 0, "input");
  p.y = half_out(k, ctx, 0);
  p.n = k.outputs[0].shape.numel();
  const double inf = std::numeric_limits<double>::infinity();
  switch (k.op) {
    case OpKind::kRelu: p.act = kActRelu; break;
    case OpKind::kRelu6: p.act = kActRelu6; break;
    case OpKind::kGelu: p.act = kActGelu; break;
    case OpKind::kTanh: p.act = kActTanh; break;
    case OpKind::kSigmoid: p.op = kUnarySigmoid; break;
    case OpKind::kHardSigmoid:
      p.op = kUnaryHardSigmoid;
      p.a = static_cast<float>(k.attrs.get_float("alpha", 0.2));
      p.b = static_cast<float>(k.attrs.get_float("beta", 0.5));
      break;
    case OpKind::kHardSwish: p.op = kUnaryHardSwish; break;
    case OpKind::kErf: p.op = kUnaryErf; break;
    case OpKind::kSqrt: p.op = kUnarySqrt; break;
    case OpKind::kClip:
      p.op = kUnaryClip;
      p.a = static_cast<float>(k.attrs.get_float("min", -inf));
      p.b = static_cast<float>(k.attrs.get_float("max", inf));
      break;
    default: ATOLL_THROW(kInternal, "{} is not a unary op", op_name(k.op));
  }
  return make_param_launch(k, p, launch_unary, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_binary(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 2, 1);
  const Binding& ab = k.inputs[0];
  const Binding& bb = k.inputs[1];
  const Binding& yb = k.outputs[0];
  BinaryArgs p;
  p.a = half_in(k, ctx, 0, "a");
  p.b = half_in(k, ctx, 1, "b");
  p.y = half_out(k, ctx, 0);
  p.n = yb.shape.numel();
  p.op = binary_code(k.op);
  p.act = act_code(k);
  p.same_shape = ab.shape == yb.shape && bb.shape == yb.shape;
  if (yb.layout == Layout::kNHWC) {
    ATOLL_CHECK(p.same_shape && ab.layout == yb.layout && bb.layout == yb.layout, kUnsupported,
                "NHWC operands must share the output's shape and layout");
  } else {
    ATOLL_CHECK(ab.layout == Layout::kRowMajor && bb.layout == Layout::kRowMajor, kUnsupported,
                "operands of a row-major output must be row-major");
  }
  const Shape out = physical_shape(yb);
  p.rank = out.rank();
  ATOLL_CHECK(p.rank <= kMaxRank, kUnsupported, "rank {} exceeds {}", p.rank, kMaxRank);
  auto strides = [&](const Shape& s, int* dst) {
    // NumPy broadcasting: align on the right; a size-1 (or missing) axis repeats with stride 0.
    ATOLL_CHECK(s.rank() <= p.rank, kUnsupported, "operand {} exceeds the output's rank", s.str());
    int64_t stride = 1;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int sd = d - (p.rank - s.rank());
      const int64_t dim = sd >= 0 ? s[sd] : 1;
      ATOLL_CHECK(dim == 1 || dim == out[d], kUnsupported, "operand {} does not broadcast to {}", s.str(),
                  out.str());
      dst[d] = dim == 1 ? 0 : static_cast<int>(stride);
      stride *= dim;
    }
  };
  for (int d = 0; d < p.rank; ++d) p.out_dims[d] = static_cast<int>(out[d]);
  strides(physical_shape(ab), p.a_strides);
  strides(physical_shape(bb), p.b_strides);
  return make_param_launch(k, p, launch_binary, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_scale_shift(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 3, 1);
  const Binding& xb = k.inputs[0];
  ATOLL_CHECK(xb.layout == k.outputs[0].layout, kUnsupported, "input and output layouts differ");
  ScaleShiftArgs p;
  p.x = half_in(k, ctx, 0, "input");
  p.scale = param_in(k, ctx, 1, "scale");
  p.shift = param_in(k, ctx, 2, "shift");
  p.y = half_out(k, ctx, 0);
  p.n = xb.shape.numel();
  p.channels = xb.shape[1];
  p.inner = xb.layout == Layout::kNHWC ? 1 : product(xb.shape, 2, xb.shape.rank());
  p.act = act_code(k);
  return make_param_launch(k, p, launch_scale_shift, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_softmax(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const Binding& xb = k.inputs[0];
  ATOLL_CHECK(xb.layout == k.outputs[0].layout, kUnsupported, "input and output layouts differ");
  const Shape s = physical_shape(xb);
  const int axis = physical_axis(xb, normalize_axis(k.attrs.get_int("axis", -1), s.rank()));
  SoftmaxArgs p;
  p.x = half_in(k, ctx, 0, "input");
  // keep_io_types, as ONNX's float16 converters do: a graph input is read as the host sent it.
  p.x_f32 = ctx.input_f32(xb);
  p.y = half_out(k, ctx, 0);
  p.outer = product(s, 0, axis);
  p.len = to_int(s[axis]);
  p.inner = product(s, axis + 1, s.rank());
  return make_param_launch(k, p, launch_softmax, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_layer_norm(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 3, 1);
  const Binding& xb = k.inputs[0];
  expect_layout(xb, Layout::kRowMajor, "input");
  expect_layout(k.outputs[0], Layout::kRowMajor, "output");
  LayerNormArgs p;
  p.x = half_in(k, ctx, 0, "input");
  p.gamma = param_in(k, ctx, 1, "gamma");
  p.beta = param_in(k, ctx, 2, "beta");
  p.y = half_out(k, ctx, 0);
  p.d = to_int(xb.shape.dim(-1));
  p.rows = xb.shape.numel() / p.d;
  p.epsilon = static_cast<float>(k.attrs.get_float("epsilon", 1e-5));
  return make_param_launch(k, p, launch_layer_norm, Grid::kStride);
}

// The compiler gives ReduceMean row-major operands (layout.cpp casts an NHWC input back first).
std::unique_ptr<KernelLaunch> prepare_reduce_mean(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const Binding& xb = k.inputs[0];
  const Binding& yb = k.outputs[0];
  ATOLL_CHECK(xb.layout == Layout::kRowMajor && yb.layout == Layout::kRowMajor, kUnsupported,
              "reduces row-major tensors only; input is {}, output {}", layout_name(xb.layout),
              layout_name(yb.layout));
  const int rank = xb.shape.rank();
  ATOLL_CHECK(rank <= kMaxRank, kUnsupported, "rank {} exceeds {}", rank, kMaxRank);
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : k.attrs.get_ints("axes")) reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
  // Runs of neighbouring axes, innermost first; size-1 axes are skipped, and an axis of the same
  // kind as the run inside it extends that run (its stride is the run's stride times its extent).
  struct Run {
    bool reduced;
    int64_t dim, stride;
  };
  std::vector<Run> runs;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const bool r = reduced[static_cast<size_t>(d)];
    if (xb.shape[d] == 1) continue;
    if (!runs.empty() && runs.back().reduced == r) {
      runs.back().dim *= xb.shape[d];
    } else {
      runs.push_back({r, xb.shape[d], stride});
    }
    stride *= xb.shape[d];
  }
  ReduceMeanArgs p;
  p.x = half_in(k, ctx, 0, "input");
  p.y = half_out(k, ctx, 0);
  int64_t outputs = 1, count = 1;
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    int& r = it->reduced ? p.red_rank : p.kept_rank;
    (it->reduced ? p.red_dims : p.kept_dims)[r] = to_int(it->dim);
    (it->reduced ? p.red_strides : p.kept_strides)[r] = to_int(it->stride);
    ++r;
    (it->reduced ? count : outputs) *= it->dim;
  }
  ATOLL_CHECK(outputs == yb.shape.numel(), kUnsupported, "output {} does not match the reduction of {}",
              yb.shape.str(), xb.shape.str());
  p.outputs = to_int(outputs);
  p.reduced = to_int(count);
  p.inner_reduced = !runs.empty() && runs.front().reduced;
  return make_param_launch(k, p, launch_reduce_mean, Grid::kStride);
}

// Casts the importer emits: integers <-> floats (f16 <-> f32 and i32 <-> i64 keep values and
// become no kernel). Float tensors are f16 on the device, constant ones included.
std::unique_ptr<KernelLaunch> prepare_cast(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const Binding& xb = k.inputs[0];
  const Binding& yb = k.outputs[0];
  ATOLL_CHECK(xb.shape == yb.shape, kUnsupported, "input {} and output {} differ in shape", xb.shape.str(),
              yb.shape.str());
  ATOLL_CHECK(xb.layout == yb.layout, kUnsupported, "input and output layouts differ");
  DType from = xb.dtype;
  if (xb.kind == Binding::Kind::kWeight) {
    const WeightFormat f = ctx.weight_format(xb.index);
    ATOLL_CHECK((f == WeightFormat::kHalf && is_float(xb.dtype)) || f == WeightFormat::kInt64, kUnsupported,
                "input is a {} weight, stored neither as f16 nor as i64", dtype_name(xb.dtype));
    from = f == WeightFormat::kHalf ? DType::kF16 : DType::kI64;
  }
  const DType to = yb.dtype;
  CastArgs p;
  p.x = ctx.address(xb);
  p.y = ctx.address(yb);
  p.n = to_int(yb.shape.numel());
  if (from == DType::kI64 && to == DType::kF16) {
    p.op = kCastI64ToHalf;
  } else if (from == DType::kI32 && to == DType::kF16) {
    p.op = kCastI32ToHalf;
  } else if (from == DType::kF16 && to == DType::kI64) {
    p.op = kCastHalfToI64;
  } else if (from == DType::kF16 && to == DType::kI32) {
    p.op = kCastHalfToI32;
  } else {
    ATOLL_THROW(kUnsupported,
                "casts between f16 (float) storage and i32 or i64 only, not {} -> {} (f32 activations: compile "
                "for the CUDA target)",
                dtype_name(from), dtype_name(to));
  }
  return make_param_launch(k, p, launch_cast, Grid::kStride);
}

}  // namespace atl::cuda
