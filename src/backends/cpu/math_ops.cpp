// Kernels for the ops imported models bring beyond the zoo's: unary math (Sigmoid, HardSigmoid,
// HardSwish, Erf, Sqrt, Clip), ReduceMean and Cast.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"

namespace atl::cpu {

namespace {

// --- unary math ---------------------------------------------------------------------------------

struct MathPlan {
  OpKind op = OpKind::kSigmoid;
  float a = 0.0f, b = 0.0f;  // HardSigmoid: alpha, beta; Clip: min, max
  int64_t n = 0;
};

KernelPlan validate_math(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  expect_shape(k.outputs[0], k.inputs[0].shape, "output");
  expect_layout(k.outputs[0], k.inputs[0].layout, "output");
  MathPlan p{k.op, 0.0f, 0.0f, k.inputs[0].shape.numel()};
  if (k.op == OpKind::kHardSigmoid) {
    p.a = static_cast<float>(k.attrs.get_float("alpha", 0.2));
    p.b = static_cast<float>(k.attrs.get_float("beta", 0.5));
  } else if (k.op == OpKind::kClip) {
    p.a = static_cast<float>(k.attrs.get_float("min", -std::numeric_limits<double>::infinity()));
    p.b = static_cast<float>(k.attrs.get_float("max", std::numeric_limits<double>::infinity()));
  }
  return {p, 0};
}

// Comparisons are written so that NaN fails them and passes through, as in PyTorch.
inline float clamp_keep_nan(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

template <typename F>
void map_elements(const float* x, float* y, int64_t n, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, n, [&](int64_t c) {
    const int64_t lo = c * kChunk;
    const int64_t hi = std::min(n, lo + kChunk);
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
}

void run_math(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<MathPlan>(&plan.params);
  const float* x = args.in_f32(0);
  float* y = args.out_f32(0);
  const float a = p.a, b = p.b;
  switch (p.op) {
    case OpKind::kSigmoid: return map_elements(x, y, p.n, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
    case OpKind::kHardSigmoid:
      return map_elements(x, y, p.n, [a, b](float v) { return clamp_keep_nan(a * v + b, 0.0f, 1.0f); });
    case OpKind::kHardSwish:
      return map_elements(x, y, p.n, [](float v) { return v * clamp_keep_nan(v / 6.0f + 0.5f, 0.0f, 1.0f); });
    case OpKind::kErf: return map_elements(x, y, p.n, [](float v) { return std::erf(v); });
    case OpKind::kSqrt: return map_elements(x, y, p.n, [](float v) { return std::sqrt(v); });
    case OpKind::kClip: return map_elements(x, y, p.n, [a, b](float v) { return clamp_keep_nan(v, a, b); });
    default: ATOLL_THROW(kInternal, "{} is not a unary math op", op_name(p.op));
  }
}

// --- ReduceMean over any set of axes of a row-major tensor ----------------------------------------

// The input viewed as alternating kept and reduced runs of dimensions, each merged to one extent.
struct ReducePlan {
  std::vector<int64_t> kept_dims, kept_strides;  // output index -> input offset
  std::vector<int64_t> red_dims, red_strides;    // reduced index -> input offset
  int64_t outputs = 1, reduced = 1;
};

KernelPlan validate_reduce_mean(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  expect_layout(x, Layout::kRowMajor, "input");
  expect_layout(k.outputs[0], Layout::kRowMajor, "output");
  const int rank = x.shape.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : k.attrs.get_ints("axes")) reduced[static_cast<size_t>(normalize_axis(a, rank))] = true;
  ReducePlan p;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    auto& dims = reduced[static_cast<size_t>(d)] ? p.red_dims : p.kept_dims;
    auto& strides = reduced[static_cast<size_t>(d)] ? p.red_strides : p.kept_strides;
    dims.insert(dims.begin(), x.shape[d]);
    strides.insert(strides.begin(), stride);
    stride *= x.shape[d];
  }
  for (int64_t d : p.kept_dims) p.outputs *= d;
  for (int64_t d : p.red_dims) p.reduced *= d;
  ATOLL_CHECK(p.outputs == k.outputs[0].shape.numel(), kUnsupported, "output {} does not match the reduction of {}",
              k.outputs[0].shape.str(), x.shape.str());
  return {p, 0};
}

int64_t offset_of(int64_t index, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    off += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return off;
}

void run_reduce_mean(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<ReducePlan>(&plan.params);
  const float* x = args.in_f32(0);
  float* y = args.out_f32(0);
  parallel_for(p.outputs, p.outputs * p.reduced, [&](int64_t o) {
    const float* base = x + offset_of(o, p.kept_dims, p.kept_strides);
    double sum = 0.0;
    for (int64_t r = 0; r < p.reduced; ++r) sum += base[offset_of(r, p.red_dims, p.red_strides)];
    y[o] = static_cast<float>(sum / static_cast<double>(p.reduced));
  });
}

// --- Cast: integers <-> floats by value ---------------------------------------------------------

struct CastPlan {
  DType from = DType::kI64, to = DType::kF32;
  int64_t n = 0;
};

KernelPlan validate_cast(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  const DType from = k.inputs[0].dtype, to = k.outputs[0].dtype;
  for (DType t : {from, to}) {
    ATOLL_CHECK(t == DType::kF32 || t == DType::kI32 || t == DType::kI64, kUnsupported,
                "casts f32, i32 and i64, not {}", dtype_name(t));
  }
  expect_shape(k.outputs[0], k.inputs[0].shape, "output");
  expect_layout(k.outputs[0], k.inputs[0].layout, "output");
  return {CastPlan{from, to, k.inputs[0].shape.numel()}, 0};
}

template <typename From, typename To>
void cast_elements(const std::byte* in, std::byte* out, int64_t n) {
  const From* x = reinterpret_cast<const From*>(in);
  To* y = reinterpret_cast<To*>(out);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<To>(x[i]);
}

template <typename From>
void cast_from(DType to, const std::byte* in, std::byte* out, int64_t n) {
  switch (to) {
    case DType::kF32: return cast_elements<From, float>(in, out, n);
    case DType::kI32: return cast_elements<From, int32_t>(in, out, n);
    default: return cast_elements<From, int64_t>(in, out, n);
  }
}

void run_cast(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<CastPlan>(&plan.params);
  switch (p.from) {
    case DType::kF32: return cast_from<float>(p.to, args.in[0], args.out[0], p.n);
    case DType::kI32: return cast_from<int32_t>(p.to, args.in[0], args.out[0], p.n);
    default: return cast_from<int64_t>(p.to, args.in[0], args.out[0], p.n);
  }
}

}  // namespace

void register_math_kernels(KernelRegistry& r) {
  for (OpKind op : {OpKind::kSigmoid, OpKind::kHardSigmoid, OpKind::kHardSwish, OpKind::kErf, OpKind::kSqrt,
                    OpKind::kClip}) {
    r[static_cast<size_t>(op)] = {validate_math, run_math};
  }
  r[static_cast<size_t>(OpKind::kReduceMean)] = {validate_reduce_mean, run_reduce_mean};
  r[static_cast<size_t>(OpKind::kCast)] = {validate_cast, run_cast};
}

}  // namespace atl::cpu
