// Entry points of the data-movement family: Transpose, layout casts, Slice, Concat, Gather.
#include <algorithm>

#include "backends/cuda/launch.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

// Row-major strides of a dense shape.
std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(static_cast<size_t>(s.rank()), 1);
  for (int d = s.rank() - 2; d >= 0; --d) st[static_cast<size_t>(d)] = st[static_cast<size_t>(d) + 1] * s[d + 1];
  return st;
}

// Copies any dense tensor with the element size of its storage.
StridedCopyArgs copy_args(const Kernel& k, const LoadContext& ctx) {
  const Binding& xb = k.inputs[0];
  const Binding& yb = k.outputs[0];
  if (xb.kind == Binding::Kind::kWeight) {
    half_in(k, ctx, 0, "input");  // a float weight is stored f16 on the device
    expect_half(yb, "output");
  } else {
    ATOLL_CHECK(xb.dtype == yb.dtype, kUnsupported, "input is {}, output {}", dtype_name(xb.dtype),
                dtype_name(yb.dtype));
    ATOLL_CHECK(xb.dtype != DType::kF32, kUnsupported, "f32 activations (compile for the CUDA target)");
  }
  StridedCopyArgs p;
  p.x = ctx.address(xb);
  p.y = ctx.address(yb);
  p.n = yb.shape.numel();
  p.elem_size = xb.kind == Binding::Kind::kWeight ? 2 : static_cast<int>(dtype_size(xb.dtype));
  const Shape out = physical_shape(yb);
  p.rank = out.rank();
  ATOLL_CHECK(p.rank <= kMaxRank, kUnsupported, "rank {} exceeds {}", p.rank, kMaxRank);
  for (int d = 0; d < p.rank; ++d) p.out_dims[d] = out[d];
  return p;
}

}  // namespace

std::unique_ptr<KernelLaunch> prepare_transpose(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  expect_layout(k.inputs[0], Layout::kRowMajor, "input");
  expect_layout(k.outputs[0], Layout::kRowMajor, "output");
  StridedCopyArgs p = copy_args(k, ctx);
  const auto& perm = k.attrs.get_ints("perm");
  ATOLL_CHECK(static_cast<int>(perm.size()) == p.rank, kUnsupported, "perm has {} entries for rank {}", perm.size(),
              p.rank);
  const std::vector<int64_t> in = dense_strides(k.inputs[0].shape);
  for (int d = 0; d < p.rank; ++d) p.in_strides[d] = in[static_cast<size_t>(perm[static_cast<size_t>(d)])];
  return make_param_launch(k, p, launch_strided_copy, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_layout_cast(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const bool to_nhwc = k.op == OpKind::kLayoutToNHWC;
  expect_layout(k.inputs[0], to_nhwc ? Layout::kRowMajor : Layout::kNHWC, "input");
  expect_layout(k.outputs[0], to_nhwc ? Layout::kNHWC : Layout::kRowMajor, "output");
  StridedCopyArgs p = copy_args(k, ctx);
  // Output axis d reads input axis perm[d] of the input's stored order.
  const std::vector<int64_t> in = dense_strides(physical_shape(k.inputs[0]));
  const int64_t perm_to_nhwc[4] = {0, 2, 3, 1};
  const int64_t perm_to_nchw[4] = {0, 3, 1, 2};
  for (int d = 0; d < 4; ++d) p.in_strides[d] = in[static_cast<size_t>(to_nhwc ? perm_to_nhwc[d] : perm_to_nchw[d])];
  return make_param_launch(k, p, launch_strided_copy, Grid::kStride);
}

std::unique_ptr<KernelLaunch> prepare_slice(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 1, 1);
  const Binding& xb = k.inputs[0];
  ATOLL_CHECK(xb.layout == k.outputs[0].layout, kUnsupported, "input and output layouts differ");
  StridedCopyArgs p = copy_args(k, ctx);
  const std::vector<int64_t> in = dense_strides(physical_shape(xb));
  for (int d = 0; d < p.rank; ++d) p.in_strides[d] = in[static_cast<size_t>(d)];
  const auto& axes = k.attrs.get_ints("axes");
  const auto& starts = k.attrs.get_ints("starts");
  const auto steps = k.attrs.get_ints("steps", std::vector<int64_t>(axes.size(), 1));
  ATOLL_CHECK(starts.size() == axes.size() && steps.size() == axes.size(), kUnsupported,
              "axes, starts and steps differ in length");
  for (size_t i = 0; i < axes.size(); ++i) {
    const int logical = normalize_axis(axes[i], xb.shape.rank());
    const int d = physical_axis(xb, logical);
    const int64_t dim = xb.shape[logical];
    const int64_t start = std::clamp(starts[i] < 0 ? starts[i] + dim : starts[i], int64_t{0}, dim);
    ATOLL_CHECK(steps[i] > 0, kUnsupported, "only positive steps are supported");
    p.offset += start * in[static_cast<size_t>(d)];
    p.in_strides[d] *= steps[i];
  }
  return make_param_launch(k, p, launch_strided_copy, Grid::kStride);
}

namespace {

class ConcatLaunch final : public KernelLaunch {
 public:
  ConcatLaunch(std::string name, std::vector<ConcatArgs> chunks)
      : KernelLaunch(std::move(name)), chunks_(std::move(chunks)) {}
  void launch(cudaStream_t stream, const int* flag) const override {
    for (const ConcatArgs& c : chunks_) launch_concat(c, stream, flag, name().c_str());
  }
  // Each launch is a grid-stride loop per part (grid.y), its x extent from blocks_for.
  bool grid_stride() const override { return true; }

 private:
  std::vector<ConcatArgs> chunks_;  // one launch per kMaxConcatParts inputs
};

}  // namespace

std::unique_ptr<KernelLaunch> prepare_concat(const Kernel& k, const LoadContext& ctx) {
  ATOLL_CHECK(!k.inputs.empty() && k.outputs.size() == 1, kUnsupported, "needs inputs and one output");
  const Binding& yb = k.outputs[0];
  for (const Binding& b : k.inputs) {
    ATOLL_CHECK(b.layout == yb.layout, kUnsupported, "inputs must share the output's layout");
  }
  const Shape out = physical_shape(yb);
  const int axis = physical_axis(yb, normalize_axis(k.attrs.get_int("axis"), yb.shape.rank()));
  int64_t rows = 1, inner = 1;
  for (int d = 0; d < axis; ++d) rows *= out[d];
  for (int d = axis + 1; d < out.rank(); ++d) inner *= out[d];
  std::vector<ConcatArgs> chunks;
  int64_t offset = 0;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    if (i % kMaxConcatParts == 0) {
      chunks.emplace_back();
      chunks.back().y = half_out(k, ctx, 0);
      chunks.back().rows = rows;
      chunks.back().out_row = out[axis] * inner;
      chunks.back().elem_size = 2;  // f16: half_in / half_out below check every operand
    }
    ConcatArgs& c = chunks.back();
    const int64_t row = physical_shape(k.inputs[i])[axis] * inner;
    c.parts[c.count++] = {half_in(k, ctx, i, "input"), static_cast<int>(row), static_cast<int>(offset)};
    c.max_part_elems = std::max(c.max_part_elems, static_cast<int>(rows * row));
    offset += row;
  }
  return std::make_unique<ConcatLaunch>(k.name, std::move(chunks));
}

std::unique_ptr<KernelLaunch> prepare_gather(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 2, 1);
  const Binding& tb = k.inputs[0];
  const Binding& ib = k.inputs[1];
  ATOLL_CHECK(tb.shape.rank() == 2, kUnsupported, "table must be [V, D], is {}", tb.shape.str());
  ATOLL_CHECK(ib.dtype == DType::kI64, kUnsupported, "indices must be i64, are {}", dtype_name(ib.dtype));
  GatherArgs p;
  p.table = half_in(k, ctx, 0, "table");
  p.idx = static_cast<const int64_t*>(ctx.address(ib));
  p.y = half_out(k, ctx, 0);
  p.rows = ib.shape.numel();
  p.vocab = tb.shape[0];
  ATOLL_CHECK(tb.shape[1] <= INT32_MAX, kUnsupported, "embedding width {} too large", tb.shape[1]);
  p.d = static_cast<int>(tb.shape[1]);
  p.error_flag = ctx.index_error_flag();
  return make_param_launch(k, p, launch_gather, Grid::kStride);
}

}  // namespace atl::cuda
