#include "backends/cpu/kernel_registry.h"

namespace atl::cpu {

namespace {

KernelRegistry build_registry() {
  KernelRegistry r{};
  register_conv_kernels(r);
  register_gemm_kernels(r);
  register_pool_kernels(r);
  register_elementwise_kernels(r);
  register_norm_kernels(r);
  register_data_kernels(r);
  register_math_kernels(r);
  return r;
}

}  // namespace

const KernelEntry& kernel_entry(OpKind op) {
  static const KernelRegistry registry = build_registry();
  const auto i = static_cast<size_t>(op);
  ATOLL_CHECK(i < registry.size() && registry[i].validate != nullptr, kUnsupported,
              "the CPU backend has no kernel for op {} (the compiler should have removed it)", op_name(op));
  return registry[i];
}

void expect_arity(const Kernel& k, size_t inputs, size_t outputs) {
  ATOLL_CHECK(k.inputs.size() == inputs && k.outputs.size() == outputs, kUnsupported,
              "expects {} inputs and {} outputs, has {} and {}", inputs, outputs, k.inputs.size(), k.outputs.size());
}

void expect_dtype(const Binding& b, DType dtype, const char* role) {
  ATOLL_CHECK(b.dtype == dtype, kUnsupported, "{} must be {}, is {}", role, dtype_name(dtype), dtype_name(b.dtype));
}

void expect_f32(const Kernel& k) {
  for (const auto& b : k.inputs) expect_dtype(b, DType::kF32, "every input");
  for (const auto& b : k.outputs) expect_dtype(b, DType::kF32, "every output");
}

void expect_layout(const Binding& b, Layout layout, const char* role) {
  const Layout want = b.shape.rank() == 4 ? layout : Layout::kRowMajor;
  ATOLL_CHECK(b.layout == want, kUnsupported, "{} {} must be {}, is {}", role, b.shape.str(), layout_name(want),
              layout_name(b.layout));
}

void expect_shape(const Binding& b, const Shape& shape, const char* role) {
  ATOLL_CHECK(b.shape == shape, kUnsupported, "{} must be {}, is {}", role, shape.str(), b.shape.str());
}

bool is_nhwc(const Binding& b) {
  return b.layout == Layout::kNHWC && b.shape.rank() == 4;
}

std::vector<int64_t> physical_dims(const Binding& b) {
  const auto& d = b.shape.dims();
  if (!is_nhwc(b)) return d;
  return {d[0], d[2], d[3], d[1]};
}

int physical_axis(const Binding& b, int axis) {
  if (!is_nhwc(b)) return axis;
  static constexpr int kNhwcPosition[4] = {0, 3, 1, 2};
  return kNhwcPosition[axis];
}

int normalize_axis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  ATOLL_CHECK(a >= 0 && a < rank, kInvalidGraph, "axis {} out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

}  // namespace atl::cpu
