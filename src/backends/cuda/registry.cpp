// The CUDA registry: op -> entry point, the weight storage plan, and validation helpers.
#include <map>

#include "backends/cuda/grid_cap.h"
#include "backends/cuda/launch.h"
#include "core/error.h"
#include "ir/op_attrs.h"

namespace atl::cuda {

namespace {

constexpr int64_t kSmallConvMaxChannels = 4;

}  // namespace

bool is_depthwise_conv(const Kernel& k) {
  const Conv2dParams p = conv2d_params(k.attrs);
  const Shape& x = k.inputs[0].shape;
  const Shape& w = k.inputs[1].shape;
  return p.group > 1 && p.group == x[1] && w[0] == p.group;
}

// Image stems (3 channels): K = kh*kw*3 fits no 16-byte loads, so the implicit GEMM would mostly
// compute addresses. Padded to 8 channels it runs on the tensor cores with 16-byte loads, at 8/3
// the multiply-adds: still several times faster than f32 FMAs (session 10 notes).
bool is_small_channel_conv(const Kernel& k) {
  const Conv2dParams p = conv2d_params(k.attrs);
  const Shape& w = k.inputs[1].shape;  // [O, C, kh, kw]
  return p.group == 1 && w[1] <= kSmallConvMaxChannels && w[0] % 8 == 0;
}

void KernelLaunch::launch_slice(cudaStream_t stream, const int* preempt_flag, int64_t begin, int64_t end,
                                int max_blocks) const {
  ATOLL_CHECK(grid_stride(), kUnsupported, "kernel '{}' runs only whole: it has no slices", name_);
  check_slice(begin, end, max_blocks);
  const GridCapScope cap(max_blocks);
  launch(stream, preempt_flag);
}

void KernelLaunch::check_slice(int64_t begin, int64_t end, int max_blocks) const {
  ATOLL_CHECK(begin >= 0 && begin < end && end <= slice_units() && max_blocks >= 0, kInvalidArgument,
              "kernel '{}': slice [{}, {}) on {} blocks is not a range of its {} units", name_, begin, end, max_blocks,
              slice_units());
}

std::unique_ptr<KernelLaunch> prepare_launch(const Kernel& k, const LoadContext& ctx) {
  try {
    for (const auto* list : {&k.inputs, &k.outputs}) {
      for (const Binding& b : *list) {
        ATOLL_CHECK(b.shape.numel() <= kMaxElements, kUnsupported, "tensor {} has more than {} elements",
                    b.shape.str(), kMaxElements);
      }
    }
    if (is_unary_elementwise(k.op)) return prepare_unary(k, ctx);
    if (is_binary_elementwise(k.op)) return prepare_binary(k, ctx);
    switch (k.op) {
      case OpKind::kConv2d: return prepare_conv2d(k, ctx);
      case OpKind::kGemm: return prepare_gemm(k, ctx);
      case OpKind::kMatMul: return prepare_matmul(k, ctx);
      case OpKind::kAttention: return prepare_attention(k, ctx);
      case OpKind::kMaxPool:
      case OpKind::kAvgPool: return prepare_pool(k, ctx);
      case OpKind::kGlobalAvgPool: return prepare_global_avg_pool(k, ctx);
      case OpKind::kReduceMean: return prepare_reduce_mean(k, ctx);
      case OpKind::kCast: return prepare_cast(k, ctx);
      case OpKind::kScaleShift: return prepare_scale_shift(k, ctx);
      case OpKind::kTranspose: return prepare_transpose(k, ctx);
      case OpKind::kLayoutToNHWC:
      case OpKind::kLayoutToNCHW: return prepare_layout_cast(k, ctx);
      case OpKind::kSlice: return prepare_slice(k, ctx);
      case OpKind::kConcat: return prepare_concat(k, ctx);
      case OpKind::kGather: return prepare_gather(k, ctx);
      case OpKind::kSoftmax: return prepare_softmax(k, ctx);
      case OpKind::kLayerNorm: return prepare_layer_norm(k, ctx);
      default: break;
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kCuda) throw;
    throw Error(e.code(), fmt::format("kernel '{}' ({}): {}", k.name, op_name(k.op), e.message()), e.file(),
                e.line());
  }
  ATOLL_THROW(kUnsupported, "kernel '{}': the CUDA backend has no kernel for op {}; run the model with --device cpu",
              k.name, op_name(k.op));
}

std::vector<WeightFormat> plan_weight_formats(const Program& p) {
  std::map<int, WeightFormat> chosen;
  auto assign = [&](const Kernel& k, const Binding& b, WeightFormat f) {
    if (b.kind != Binding::Kind::kWeight) return;
    if (p.weights[static_cast<size_t>(b.index)].dtype == DType::kI64) f = WeightFormat::kInt64;
    auto [it, fresh] = chosen.emplace(b.index, f);
    ATOLL_CHECK(fresh || it->second == f, kUnsupported,
                "weight '{}' is used in two storage roles (kernel '{}'); the CUDA backend keeps one copy",
                p.weights[static_cast<size_t>(b.index)].name, k.name);
  };
  for (const Kernel& k : p.kernels) {
    for (size_t i = 0; i < k.inputs.size(); ++i) {
      WeightFormat f = WeightFormat::kHalf;
      switch (k.op) {
        case OpKind::kConv2d:
          if (i == 1 && is_depthwise_conv(k)) f = WeightFormat::kTapsMajor;
          if (i == 1 && is_small_channel_conv(k)) f = WeightFormat::kChannelsPadded8;
          // Input 2 is the bias when there is one; the residual (last) is an activation.
          if (i == 2 && conv2d_params(k.attrs).has_bias) f = WeightFormat::kParamF32;
          break;
        case OpKind::kGemm:
          if (i == 2 && k.attrs.get_int("bias", 0) != 0) f = WeightFormat::kParamF32;
          break;
        case OpKind::kScaleShift:
        case OpKind::kLayerNorm:
          if (i >= 1) f = WeightFormat::kParamF32;
          break;
        default: break;
      }
      assign(k, k.inputs[i], f);
    }
  }
  std::vector<WeightFormat> out(p.weights.size(), WeightFormat::kHalf);
  for (const auto& [index, f] : chosen) out[static_cast<size_t>(index)] = f;
  for (size_t i = 0; i < p.weights.size(); ++i) {
    if (p.weights[i].dtype == DType::kI64) out[i] = WeightFormat::kInt64;
  }
  return out;
}

void expect_arity(const Kernel& k, size_t inputs, size_t outputs) {
  ATOLL_CHECK(k.inputs.size() == inputs && k.outputs.size() == outputs, kUnsupported,
              "expects {} inputs and {} outputs, has {} and {}", inputs, outputs, k.inputs.size(), k.outputs.size());
}

void expect_half(const Binding& b, const char* role) {
  ATOLL_CHECK(b.kind == Binding::Kind::kWeight || b.dtype == DType::kF16, kUnsupported,
              "{} is {}; the CUDA backend stores activations in f16 (compile for the CUDA target)", role,
              dtype_name(b.dtype));
}

void expect_layout(const Binding& b, Layout layout, const char* role) {
  const Layout want = b.shape.rank() == 4 ? layout : Layout::kRowMajor;
  ATOLL_CHECK(b.layout == want, kUnsupported, "{} {} has layout {}, expected {}", role, b.shape.str(),
              layout_name(b.layout), layout_name(want));
}

const __half* half_in(const Kernel& k, const LoadContext& ctx, size_t i, const char* role) {
  const Binding& b = k.inputs.at(i);
  if (b.kind == Binding::Kind::kWeight) {
    const WeightFormat f = ctx.weight_format(b.index);
    ATOLL_CHECK(f == WeightFormat::kHalf || f == WeightFormat::kTapsMajor || f == WeightFormat::kChannelsPadded8,
                kUnsupported,
                "{} is a weight not stored as f16", role);
  } else {
    expect_half(b, role);
  }
  return static_cast<const __half*>(ctx.address(b));
}

__half* half_out(const Kernel& k, const LoadContext& ctx, size_t i) {
  const Binding& b = k.outputs.at(i);
  expect_half(b, "output");
  return static_cast<__half*>(ctx.address(b));
}

const float* param_in(const Kernel& k, const LoadContext& ctx, size_t i, const char* role) {
  const Binding& b = k.inputs.at(i);
  ATOLL_CHECK(b.kind == Binding::Kind::kWeight && ctx.weight_format(b.index) == WeightFormat::kParamF32, kUnsupported,
              "{} must be a constant weight (the CUDA backend reads it as f32)", role);
  return static_cast<const float*>(ctx.address(b));
}

Shape physical_shape(const Binding& b) {
  if (b.layout != Layout::kNHWC || b.shape.rank() != 4) return b.shape;
  return Shape{b.shape[0], b.shape[2], b.shape[3], b.shape[1]};
}

int physical_axis(const Binding& b, int logical) {
  if (b.layout != Layout::kNHWC || b.shape.rank() != 4) return logical;
  constexpr int kNhwcPosition[4] = {0, 3, 1, 2};
  return kNhwcPosition[logical];
}

int normalize_axis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  ATOLL_CHECK(a >= 0 && a < rank, kUnsupported, "axis {} out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

int act_code(const Kernel& k) {
  switch (act_from_name(k.attrs.get_string("act", "none"))) {
    case Act::kNone: return kActNone;
    case Act::kRelu: return kActRelu;
    case Act::kRelu6: return kActRelu6;
    case Act::kGelu: return kActGelu;
    case Act::kTanh: return kActTanh;
  }
  return kActNone;
}

}  // namespace atl::cuda
