// Data movement: Concat, Transpose, Slice, Gather and the NCHW <-> NHWC layout casts.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"

namespace atl::cpu {

namespace {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

// Copies out[i] = in[offset(i)] for a row-major output of `dims` where input offsets step by
// `in_strides` per output dimension (starting at `in_base`); the innermost dimension is the loop.
void strided_copy(const float* in, int64_t in_base, const std::vector<int64_t>& in_strides,
                  const std::vector<int64_t>& dims, float* out) {
  const int64_t inner = dims.back();
  const int64_t inner_stride = in_strides.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) rows *= dims[d];
  parallel_for(rows, rows * inner, [&](int64_t row) {
    int64_t off = in_base, rest = row;
    for (size_t d = dims.size() - 1; d-- > 0;) {
      off += (rest % dims[d]) * in_strides[d];
      rest /= dims[d];
    }
    const float* src = in + off;
    float* dst = out + row * inner;
    if (inner_stride == 1) {
      std::memcpy(dst, src, static_cast<size_t>(inner) * sizeof(float));
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * inner_stride];
    }
  });
}

// --- Concat: storage order viewed as [outer, axis, inner]; each input is one chunk per outer ----

struct ConcatPlan {
  int64_t outer = 1;
  std::vector<int64_t> chunk;  // elements per outer index, per input
  int64_t total = 0;           // sum of chunk
};

KernelPlan validate_concat(const Kernel& k, int) {
  ATOLL_CHECK(!k.inputs.empty() && k.outputs.size() == 1, kUnsupported, "expects inputs and one output");
  expect_f32(k);
  const Binding& y = k.outputs[0];
  const int axis = normalize_axis(k.attrs.get_int("axis"), y.shape.rank());
  const int paxis = physical_axis(y, axis);
  const std::vector<int64_t> out_dims = physical_dims(y);
  ConcatPlan p;
  int64_t inner = 1;
  for (size_t d = 0; d < out_dims.size(); ++d) {
    if (static_cast<int>(d) < paxis) p.outer *= out_dims[d];
    if (static_cast<int>(d) > paxis) inner *= out_dims[d];
  }
  int64_t along = 0;
  for (const Binding& x : k.inputs) {
    expect_layout(x, y.layout, "input");
    ATOLL_CHECK(x.shape.rank() == y.shape.rank(), kUnsupported, "input {} and output {} differ in rank", x.shape.str(),
                y.shape.str());
    for (int d = 0; d < y.shape.rank(); ++d) {
      ATOLL_CHECK(d == axis || x.shape[d] == y.shape[d], kUnsupported, "input {} does not fit output {} on axis {}",
                  x.shape.str(), y.shape.str(), axis);
    }
    along += x.shape[axis];
    p.chunk.push_back(x.shape[axis] * inner);
  }
  ATOLL_CHECK(along == y.shape[axis], kUnsupported, "inputs sum to {} on axis {}, output has {}", along, axis,
              y.shape[axis]);
  p.total = along * inner;
  return {p, 0};
}

void run_concat(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<ConcatPlan>(&plan.params);
  float* y = args.out_f32(0);
  parallel_for(p.outer, p.outer * p.total, [&](int64_t o) {
    float* dst = y + o * p.total;
    for (size_t i = 0; i < p.chunk.size(); ++i) {
      std::memcpy(dst, args.in_f32(i) + o * p.chunk[i], static_cast<size_t>(p.chunk[i]) * sizeof(float));
      dst += p.chunk[i];
    }
  });
}

// --- Transpose (row-major) and Slice (either layout): both are strided copies ---------------

struct StridedCopyPlan {
  int64_t in_base = 0;
  std::vector<int64_t> in_strides, out_dims;  // in storage order of the output
};

KernelPlan validate_transpose(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  const Binding& y = k.outputs[0];
  expect_layout(x, Layout::kRowMajor, "input");
  expect_layout(y, Layout::kRowMajor, "output");
  const auto& perm = k.attrs.get_ints("perm");
  const int r = x.shape.rank();
  ATOLL_CHECK(static_cast<int>(perm.size()) == r, kUnsupported, "perm has {} entries for rank {}", perm.size(), r);
  const std::vector<int64_t> strides = row_major_strides(x.shape.dims());
  StridedCopyPlan p;
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t axis : perm) {
    ATOLL_CHECK(axis >= 0 && axis < r && !seen[static_cast<size_t>(axis)], kUnsupported, "perm is not a permutation");
    seen[static_cast<size_t>(axis)] = true;
    p.out_dims.push_back(x.shape[static_cast<int>(axis)]);
    p.in_strides.push_back(strides[static_cast<size_t>(axis)]);
  }
  expect_shape(y, Shape(p.out_dims), "output");
  if (p.out_dims.empty()) {  // rank 0: one element
    p.out_dims = {1};
    p.in_strides = {1};
  }
  return {p, 0};
}

KernelPlan validate_slice(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  const Binding& y = k.outputs[0];
  expect_layout(y, x.layout, "output");
  const auto& axes = k.attrs.get_ints("axes");
  const auto& starts = k.attrs.get_ints("starts");
  const auto& ends = k.attrs.get_ints("ends");
  const auto steps = k.attrs.get_ints("steps", std::vector<int64_t>(axes.size(), 1));
  ATOLL_CHECK(starts.size() == axes.size() && ends.size() == axes.size() && steps.size() == axes.size(), kUnsupported,
              "axes, starts, ends and steps must have equal length");
  std::vector<int64_t> out = x.shape.dims();
  std::vector<int64_t> begin(out.size(), 0), step(out.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int axis = normalize_axis(axes[i], x.shape.rank());
    const int64_t dim = x.shape[axis];
    ATOLL_CHECK(steps[i] > 0, kUnsupported, "step {} on axis {}: only positive steps", steps[i], axis);
    const int64_t s = std::clamp(starts[i] < 0 ? starts[i] + dim : starts[i], int64_t{0}, dim);
    const int64_t e = std::clamp(ends[i] < 0 ? ends[i] + dim : ends[i], int64_t{0}, dim);
    ATOLL_CHECK(e > s, kUnsupported, "empty slice [{}:{}] on axis {}", s, e, axis);
    out[static_cast<size_t>(axis)] = (e - s + steps[i] - 1) / steps[i];
    begin[static_cast<size_t>(axis)] = s;
    step[static_cast<size_t>(axis)] = steps[i];
  }
  expect_shape(y, Shape(out), "output");
  // Logical per-axis begin/step, then walked in storage order.
  const std::vector<int64_t> in_phys = physical_dims(x);
  const std::vector<int64_t> in_strides = row_major_strides(in_phys);
  StridedCopyPlan p;
  p.out_dims.resize(out.size());
  p.in_strides.resize(out.size());
  for (int axis = 0; axis < x.shape.rank(); ++axis) {
    const auto pa = static_cast<size_t>(physical_axis(x, axis));
    const auto la = static_cast<size_t>(axis);
    p.out_dims[pa] = out[la];
    p.in_strides[pa] = in_strides[pa] * step[la];
    p.in_base += in_strides[pa] * begin[la];
  }
  return {p, 0};
}

void run_strided_copy(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<StridedCopyPlan>(&plan.params);
  strided_copy(args.in_f32(0), p.in_base, p.in_strides, p.out_dims, args.out_f32(0));
}

// --- Gather: rows of table[V, D] picked by integer indices -------------------------------------

struct GatherPlan {
  int64_t rows = 0, vocab = 0, width = 0;
  bool wide_index = true;  // i64 indices; i32 otherwise
};

KernelPlan validate_gather(const Kernel& k, int) {
  expect_arity(k, 2, 1);
  const Binding& table = k.inputs[0];
  const Binding& idx = k.inputs[1];
  const Binding& y = k.outputs[0];
  expect_dtype(table, DType::kF32, "table");
  expect_dtype(y, DType::kF32, "output");
  ATOLL_CHECK(idx.dtype == DType::kI64 || idx.dtype == DType::kI32, kUnsupported, "indices must be i64 or i32, are {}",
              dtype_name(idx.dtype));
  ATOLL_CHECK(table.shape.rank() == 2, kUnsupported, "table must be [V, D], is {}", table.shape.str());
  for (const auto* b : {&idx, &y}) expect_layout(*b, Layout::kRowMajor, "operand");
  GatherPlan p;
  p.vocab = table.shape[0];
  p.width = table.shape[1];
  p.rows = idx.shape.numel();
  p.wide_index = idx.dtype == DType::kI64;
  std::vector<int64_t> out = idx.shape.dims();
  out.push_back(p.width);
  expect_shape(y, Shape(out), "output");
  return {p, 0};
}

void run_gather(const Kernel& k, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<GatherPlan>(&plan.params);
  const float* table = args.in_f32(0);
  const auto* idx64 = reinterpret_cast<const int64_t*>(args.in[1]);
  const auto* idx32 = reinterpret_cast<const int32_t*>(args.in[1]);
  auto index = [&](int64_t i) { return p.wide_index ? idx64[i] : static_cast<int64_t>(idx32[i]); };
  // Checked before any row moves: an exception cannot leave an OpenMP region.
  for (int64_t i = 0; i < p.rows; ++i) {
    const int64_t v = index(i);
    ATOLL_CHECK(v >= 0 && v < p.vocab, kInvalidArgument,
                "kernel '{}': index {} at position {} is outside the table of {} rows", k.name, v, i, p.vocab);
  }
  float* y = args.out_f32(0);
  parallel_for(p.rows, p.rows * p.width, [&](int64_t i) {
    std::memcpy(y + i * p.width, table + index(i) * p.width, static_cast<size_t>(p.width) * sizeof(float));
  });
}

// --- Layout casts: [N, A, B] -> [N, B, A] per image (A = C, B = H*W to NHWC; reversed back) -----

struct LayoutCastPlan {
  int64_t n = 0, a = 0, b = 0;
};

template <Layout From, Layout To>
KernelPlan validate_layout_cast(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  ATOLL_CHECK(x.shape.rank() == 4, kUnsupported, "layout casts need 4-D tensors, got {}", x.shape.str());
  expect_layout(x, From, "input");
  expect_layout(k.outputs[0], To, "output");
  expect_shape(k.outputs[0], x.shape, "output");
  const int64_t c = x.shape[1], hw = x.shape[2] * x.shape[3];
  return {LayoutCastPlan{x.shape[0], To == Layout::kNHWC ? c : hw, To == Layout::kNHWC ? hw : c}, 0};
}

void run_layout_cast(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<LayoutCastPlan>(&plan.params);
  const float* x = args.in_f32(0);
  float* y = args.out_f32(0);
  // Tiles keep both the reads and the writes within a few cache lines.
  constexpr int64_t kTile = 32;
  const int64_t tiles_a = (p.a + kTile - 1) / kTile, tiles_b = (p.b + kTile - 1) / kTile;
  parallel_for(p.n * tiles_b, p.n * p.a * p.b, [&](int64_t task) {
    const int64_t img = task / tiles_b, tb = task % tiles_b;
    const float* src = x + img * p.a * p.b;
    float* dst = y + img * p.a * p.b;
    const int64_t b1 = std::min(p.b, (tb + 1) * kTile);
    for (int64_t ta = 0; ta < tiles_a; ++ta) {
      const int64_t a1 = std::min(p.a, (ta + 1) * kTile);
      for (int64_t j = tb * kTile; j < b1; ++j) {
        for (int64_t i = ta * kTile; i < a1; ++i) dst[j * p.a + i] = src[i * p.b + j];
      }
    }
  });
}

}  // namespace

void register_data_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kConcat)] = {validate_concat, run_concat};
  r[static_cast<size_t>(OpKind::kTranspose)] = {validate_transpose, run_strided_copy};
  r[static_cast<size_t>(OpKind::kSlice)] = {validate_slice, run_strided_copy};
  r[static_cast<size_t>(OpKind::kGather)] = {validate_gather, run_gather};
  r[static_cast<size_t>(OpKind::kLayoutToNHWC)] = {validate_layout_cast<Layout::kRowMajor, Layout::kNHWC>,
                                                   run_layout_cast};
  r[static_cast<size_t>(OpKind::kLayoutToNCHW)] = {validate_layout_cast<Layout::kNHWC, Layout::kRowMajor>,
                                                   run_layout_cast};
}

}  // namespace atl::cpu
