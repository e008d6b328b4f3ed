// Elementwise kernels: activations, Add/Sub/Mul/Div/Pow with NumPy broadcasting, ScaleShift.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"

namespace atl::cpu {

namespace {

template <Act A>
void act_range(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = activate<A>(x[i]);
}

// y[i] = act(x[i]) for n elements.
void apply_act(Act act, const float* x, float* y, int64_t n) {
  with_act(act, [&]<Act A>() {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    parallel_for(chunks, n, [&](int64_t c) {
      const int64_t lo = c * kChunk;
      act_range<A>(x + lo, y + lo, std::min(kChunk, n - lo));
    });
  });
}

// --- Relu / Relu6 / Gelu / Tanh ---------------------------------------------------------------

struct UnaryPlan {
  Act act = Act::kNone;
  int64_t n = 0;
};

template <Act A>
KernelPlan validate_unary(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  expect_shape(k.outputs[0], k.inputs[0].shape, "output");
  expect_layout(k.outputs[0], k.inputs[0].layout, "output");
  return {UnaryPlan{A, k.inputs[0].shape.numel()}, 0};
}

void run_unary(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<UnaryPlan>(&plan.params);
  apply_act(p.act, args.in_f32(0), args.out_f32(0), p.n);
}

// --- Add / Sub / Mul / Div / Pow ----------------------------------------------------------------------------------

// Broadcasting reduced to a few dimensions: size-1 dimensions dropped and neighbours that step
// through memory together merged, so the innermost loop is as long as possible.
enum class BinOp { kAdd, kSub, kMul, kDiv, kPow };

BinOp bin_op_of(OpKind op) {
  switch (op) {
    case OpKind::kAdd: return BinOp::kAdd;
    case OpKind::kSub: return BinOp::kSub;
    case OpKind::kMul: return BinOp::kMul;
    case OpKind::kDiv: return BinOp::kDiv;
    case OpKind::kPow: return BinOp::kPow;
    default: ATOLL_THROW(kInternal, "{} is not a binary arithmetic op", op_name(op));
  }
}

struct BinaryPlan {
  BinOp op = BinOp::kAdd;
  Act act = Act::kNone;
  std::vector<int64_t> dims, stride_a, stride_b;  // stride 0 where the operand is broadcast
  int64_t rows = 1;                               // product of all but the innermost dimension
};

KernelPlan validate_binary(const Kernel& k, int) {
  expect_arity(k, 2, 1);
  expect_f32(k);
  BinaryPlan p;
  p.op = bin_op_of(k.op);
  p.act = act_from_name(k.attrs.get_string("act", "none"));
  const Binding& a = k.inputs[0];
  const Binding& b = k.inputs[1];
  const Binding& y = k.outputs[0];
  if (is_nhwc(y) || is_nhwc(a) || is_nhwc(b)) {
    // NHWC only for equal shapes: broadcasting is defined on logical positions.
    expect_shape(a, y.shape, "first operand");
    expect_shape(b, y.shape, "second operand");
    for (const auto* t : {&a, &b, &y}) expect_layout(*t, Layout::kNHWC, "operand");
  }
  const int r = y.shape.rank();
  ATOLL_CHECK(a.shape.rank() <= r && b.shape.rank() <= r, kUnsupported, "operands {} and {} exceed output rank of {}",
              a.shape.str(), b.shape.str(), y.shape.str());
  std::vector<int64_t> sa(static_cast<size_t>(r), 0), sb(static_cast<size_t>(r), 0);
  int64_t step_a = 1, step_b = 1;
  for (int d = r - 1; d >= 0; --d) {
    const int64_t out = y.shape[d];
    const int da = d - (r - a.shape.rank());
    const int db = d - (r - b.shape.rank());
    const int64_t ea = da >= 0 ? a.shape[da] : 1;
    const int64_t eb = db >= 0 ? b.shape[db] : 1;
    ATOLL_CHECK((ea == out || ea == 1) && (eb == out || eb == 1), kUnsupported, "{} and {} do not broadcast to {}",
                a.shape.str(), b.shape.str(), y.shape.str());
    sa[static_cast<size_t>(d)] = ea == 1 ? 0 : step_a;
    sb[static_cast<size_t>(d)] = eb == 1 ? 0 : step_b;
    step_a *= ea;
    step_b *= eb;
  }
  for (int d = 0; d < r; ++d) {
    const int64_t size = y.shape[d];
    if (size == 1) continue;
    const bool merges = !p.dims.empty() && p.stride_a.back() == sa[static_cast<size_t>(d)] * size &&
                        p.stride_b.back() == sb[static_cast<size_t>(d)] * size;
    if (merges) {
      p.dims.back() *= size;
      p.stride_a.back() = sa[static_cast<size_t>(d)];
      p.stride_b.back() = sb[static_cast<size_t>(d)];
    } else {
      p.dims.push_back(size);
      p.stride_a.push_back(sa[static_cast<size_t>(d)]);
      p.stride_b.push_back(sb[static_cast<size_t>(d)]);
    }
  }
  if (p.dims.empty()) {  // every dimension is 1: a single element
    p.dims = {1};
    p.stride_a = {1};
    p.stride_b = {1};
  }
  for (size_t d = 0; d + 1 < p.dims.size(); ++d) p.rows *= p.dims[d];
  return {p, 0};
}

template <BinOp Op, Act A>
inline float combine(float x, float y) {
  if constexpr (Op == BinOp::kAdd) return activate<A>(x + y);
  if constexpr (Op == BinOp::kSub) return activate<A>(x - y);
  if constexpr (Op == BinOp::kMul) return activate<A>(x * y);
  if constexpr (Op == BinOp::kDiv) return activate<A>(x / y);
  if constexpr (Op == BinOp::kPow) return activate<A>(std::pow(x, y));
}

template <BinOp Op, Act A>
void binary_span(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = combine<Op, A>(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i) y[i] = combine<Op, A>(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i) y[i] = combine<Op, A>(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = combine<Op, A>(a[i * sa], b[i * sb]);
  }
}

template <BinOp Op, Act A>
void run_binary_typed(const BinaryPlan& p, const float* a, const float* b, float* y) {
  const int64_t inner = p.dims.back();
  const int64_t ia = p.stride_a.back(), ib = p.stride_b.back();
  if (p.rows == 1) {
    const int64_t chunks = (inner + kChunk - 1) / kChunk;
    parallel_for(chunks, inner, [&](int64_t c) {
      const int64_t lo = c * kChunk;
      binary_span<Op, A>(a + lo * ia, ia, b + lo * ib, ib, y + lo, std::min(kChunk, inner - lo));
    });
    return;
  }
  const int outer_rank = static_cast<int>(p.dims.size()) - 1;
  parallel_for(p.rows, p.rows * inner, [&](int64_t row) {
    int64_t off_a = 0, off_b = 0, rest = row;
    for (int d = outer_rank - 1; d >= 0; --d) {
      const int64_t i = rest % p.dims[static_cast<size_t>(d)];
      rest /= p.dims[static_cast<size_t>(d)];
      off_a += i * p.stride_a[static_cast<size_t>(d)];
      off_b += i * p.stride_b[static_cast<size_t>(d)];
    }
    binary_span<Op, A>(a + off_a, ia, b + off_b, ib, y + row * inner, inner);
  });
}

void run_binary(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<BinaryPlan>(&plan.params);
  const float* a = args.in_f32(0);
  const float* b = args.in_f32(1);
  float* y = args.out_f32(0);
  with_act(p.act, [&]<Act A>() {
    switch (p.op) {
      case BinOp::kAdd: return run_binary_typed<BinOp::kAdd, A>(p, a, b, y);
      case BinOp::kSub: return run_binary_typed<BinOp::kSub, A>(p, a, b, y);
      case BinOp::kMul: return run_binary_typed<BinOp::kMul, A>(p, a, b, y);
      case BinOp::kDiv: return run_binary_typed<BinOp::kDiv, A>(p, a, b, y);
      case BinOp::kPow: return run_binary_typed<BinOp::kPow, A>(p, a, b, y);
    }
  });
}

// --- ScaleShift: y = act(x * scale[c] + shift[c]), c = logical axis 1 -------------------------

struct ScaleShiftPlan {
  Act act = Act::kNone;
  bool channels_last = false;
  int64_t outer = 0, channels = 0, inner = 0;  // row-major [outer, channels, inner]; NHWC: inner = 1
};

KernelPlan validate_scale_shift(const Kernel& k, int) {
  expect_arity(k, 3, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  ATOLL_CHECK(x.shape.rank() >= 2, kUnsupported, "input {} has no channel axis", x.shape.str());
  ScaleShiftPlan p;
  p.act = act_from_name(k.attrs.get_string("act", "none"));
  p.channels = x.shape[1];
  expect_shape(k.inputs[1], Shape{p.channels}, "scale");
  expect_shape(k.inputs[2], Shape{p.channels}, "shift");
  expect_shape(k.outputs[0], x.shape, "output");
  expect_layout(k.outputs[0], x.layout, "output");
  p.channels_last = is_nhwc(x);
  p.outer = x.shape[0];
  p.inner = x.shape.numel() / (p.outer * p.channels);
  if (p.channels_last) {
    p.outer *= p.inner;
    p.inner = 1;
  }
  return {p, 0};
}

void run_scale_shift(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<ScaleShiftPlan>(&plan.params);
  const float* x = args.in_f32(0);
  const float* scale = args.in_f32(1);
  const float* shift = args.in_f32(2);
  float* y = args.out_f32(0);
  with_act(p.act, [&]<Act A>() {
    if (p.channels_last) {
      parallel_for(p.outer, p.outer * p.channels, [&](int64_t r) {
        const float* xr = x + r * p.channels;
        float* yr = y + r * p.channels;
        for (int64_t c = 0; c < p.channels; ++c) yr[c] = activate<A>(xr[c] * scale[c] + shift[c]);
      });
      return;
    }
    const int64_t planes = p.outer * p.channels;
    parallel_for(planes, planes * p.inner, [&](int64_t plane) {
      const int64_t c = plane % p.channels;
      const float s = scale[c], t = shift[c];
      const float* xr = x + plane * p.inner;
      float* yr = y + plane * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) yr[i] = activate<A>(xr[i] * s + t);
    });
  });
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kRelu)] = {validate_unary<Act::kRelu>, run_unary};
  r[static_cast<size_t>(OpKind::kRelu6)] = {validate_unary<Act::kRelu6>, run_unary};
  r[static_cast<size_t>(OpKind::kGelu)] = {validate_unary<Act::kGelu>, run_unary};
  r[static_cast<size_t>(OpKind::kTanh)] = {validate_unary<Act::kTanh>, run_unary};
  r[static_cast<size_t>(OpKind::kAdd)] = {validate_binary, run_binary};
  r[static_cast<size_t>(OpKind::kMul)] = {validate_binary, run_binary};
  r[static_cast<size_t>(OpKind::kSub)] = {validate_binary, run_binary};
  r[static_cast<size_t>(OpKind::kDiv)] = {validate_binary, run_binary};
  r[static_cast<size_t>(OpKind::kPow)] = {validate_binary, run_binary};
  r[static_cast<size_t>(OpKind::kScaleShift)] = {validate_scale_shift, run_scale_shift};
}

}  // namespace atl::cpu
