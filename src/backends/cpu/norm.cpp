// Softmax over any axis and LayerNorm over the last axis. Sums accumulate in double: these
// kernels are cheap and the CPU backend is the oracle.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"

namespace atl::cpu {

namespace {

// --- Softmax: the tensor viewed in storage order as [outer, axis, inner] ----------------------

struct SoftmaxPlan {
  int64_t outer = 1, axis = 1, inner = 1;
};

KernelPlan validate_softmax(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  expect_shape(k.outputs[0], x.shape, "output");
  expect_layout(k.outputs[0], x.layout, "output");
  const int axis = physical_axis(x, normalize_axis(k.attrs.get_int("axis", -1), x.shape.rank()));
  const std::vector<int64_t> dims = physical_dims(x);
  SoftmaxPlan p;
  for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
    const int64_t size = dims[static_cast<size_t>(d)];
    if (d < axis) {
      p.outer *= size;
    } else if (d == axis) {
      p.axis = size;
    } else {
      p.inner *= size;
    }
  }
  return {p, 0};
}

void run_softmax(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<SoftmaxPlan>(&plan.params);
  const float* x = args.in_f32(0);
  float* y = args.out_f32(0);
  const int64_t lines = p.outer * p.inner;
  parallel_for(lines, lines * p.axis, [&](int64_t line) {
    const int64_t base = (line / p.inner) * p.axis * p.inner + line % p.inner;
    const float* in = x + base;
    float* out = y + base;
    float max = in[0];
    for (int64_t i = 1; i < p.axis; ++i) max = std::max(max, in[i * p.inner]);
    double sum = 0.0;
    for (int64_t i = 0; i < p.axis; ++i) {
      const float e = std::exp(in[i * p.inner] - max);
      out[i * p.inner] = e;
      sum += e;
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < p.axis; ++i) out[i * p.inner] *= inv;
  });
}

// --- LayerNorm over the last axis ---------------------------------------------------------------

struct LayerNormPlan {
  int64_t rows = 0, width = 0;
  double epsilon = 1e-5;
};

KernelPlan validate_layer_norm(const Kernel& k, int) {
  expect_arity(k, 3, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  ATOLL_CHECK(x.shape.rank() >= 1, kUnsupported, "input must have at least one axis");
  expect_layout(x, Layout::kRowMajor, "input");
  expect_layout(k.outputs[0], Layout::kRowMajor, "output");
  expect_shape(k.outputs[0], x.shape, "output");
  LayerNormPlan p;
  p.width = x.shape.dim(-1);
  p.rows = x.shape.numel() / p.width;
  p.epsilon = k.attrs.get_float("epsilon", 1e-5);
  expect_shape(k.inputs[1], Shape{p.width}, "gamma");
  expect_shape(k.inputs[2], Shape{p.width}, "beta");
  return {p, 0};
}

void run_layer_norm(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<LayerNormPlan>(&plan.params);
  const float* x = args.in_f32(0);
  const float* gamma = args.in_f32(1);
  const float* beta = args.in_f32(2);
  float* y = args.out_f32(0);
  parallel_for(p.rows, p.rows * p.width, [&](int64_t r) {
    const float* in = x + r * p.width;
    float* out = y + r * p.width;
    double sum = 0.0;
    for (int64_t i = 0; i < p.width; ++i) sum += in[i];
    const double mean = sum / static_cast<double>(p.width);
    double sq = 0.0;
    for (int64_t i = 0; i < p.width; ++i) sq += (in[i] - mean) * (in[i] - mean);
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(p.width) + p.epsilon);
    for (int64_t i = 0; i < p.width; ++i) {
      out[i] = static_cast<float>((in[i] - mean) * rstd) * gamma[i] + beta[i];
    }
  });
}

}  // namespace

void register_norm_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kSoftmax)] = {validate_softmax, run_softmax};
  r[static_cast<size_t>(OpKind::kLayerNorm)] = {validate_layer_norm, run_layer_norm};
}

}  // namespace atl::cpu
