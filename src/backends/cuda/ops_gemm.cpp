// Entry points of the tensor-core family: Conv2d (implicit GEMM, or a direct kernel for depthwise
// and few-channel convolutions),
// Gemm and MatMul. Each validates its kernel and picks a tile and split-K at load.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/launch.h"
#include "core/error.h"
#include "ir/op_attrs.h"

namespace atl::cuda {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int checked_int(int64_t v, const char* what) {
  ATOLL_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), kUnsupported, "{} = {} exceeds the 32-bit range", what,
              v);
  return static_cast<int>(v);
}

class GemmLaunch final : public KernelLaunch {
 public:
  GemmLaunch(std::string name, const GemmParams& p, bool vec, bool b_kn, const DeviceInfo& dev)
      : KernelLaunch(std::move(name)),
        params_(p),
        shape_{p.M,
               p.N,
               p.K,
               p.batch,
               vec,
               b_kn,
               dev.wgmma,
               dev.wgmma && vec && !b_kn && tma_gemm_applies(p) && (dev.tma_im2col || tma_reads_plain_a(p)),
               dev.pingpong,
               dev.dual_tile,
               dev.cluster_tile,
               p.n_segment,
               dev.gemv && vec && !b_kn && gemv_applies(p)} {
    config_.vec = vec;
    config_.b_kn = b_kn;
    params_.check_tiles = dev.gemm_check_tiles;
    params_.epi_check_chunks = dev.gemm_epi_check_chunks;
    for (const GemmChoice& c : gemm_choices()) prepare_gemm_kernel({c.tile, vec, b_kn});
    set_gemm_choice(choose_gemm(shape_, dev.sm_count));
  }

  void launch(cudaStream_t stream, const int* flag) const override {
    launch_gemm(params_, config_, stream, flag, name().c_str());
  }
  // The GEMV walks its columns grid-stride on a blocks_for grid: it runs whole on a capped grid.
  bool grid_stride() const override { return config_.tile == GemmTile::kGemv; }
  int64_t slice_units() const override { return grid_stride() ? 1 : gemm_launch_tiles(params_, config_.tile); }
  void launch_slice(cudaStream_t stream, const int* flag, int64_t begin, int64_t end, int max_blocks) const override {
    if (grid_stride()) return KernelLaunch::launch_slice(stream, flag, begin, end, max_blocks);
    check_slice(begin, end, max_blocks);
    GemmParams p = params_;
    p.tile_begin = static_cast<int>(begin);
    p.tile_end = static_cast<int>(end);
    p.max_blocks = max_blocks;
    launch_gemm(p, config_, stream, flag, name().c_str());
  }
  // For operands that live in the workspace, known only once it is bound.
  void set_a(const __half* a) { params_.a = a; }
  size_t workspace_bytes() const override { return workspace_bytes_for(gemm_choice()); }
  void bind_workspace(void* workspace) override { params_.partial = static_cast<float*>(workspace); }
  std::vector<GemmChoice> gemm_choices() const override { return candidate_choices(shape_); }
  GemmChoice gemm_choice() const override { return {config_.tile, params_.splits}; }
  void set_gemm_choice(const GemmChoice& c) override {
    config_.tile = c.tile;
    const int tile_k = gemm_tile_k(c.tile);
    const int k_tiles = (params_.K + tile_k - 1) / tile_k;
    params_.splits = std::max(1, std::min(c.splits, k_tiles));
    params_.k_tiles_per_split = (k_tiles + params_.splits - 1) / params_.splits;
  }
  size_t workspace_bytes_for(const GemmChoice& c) const override { return split_workspace_bytes(shape_, c); }
  std::string tune_key() const override {
    const GemmParams& p = params_;
    std::string key = fmt::format("{} {} {} {} {} {} | {} {} {} {} {} {} {} {} {} {} {} {} {} | {} {} {} {} {} {}", p.batch,
                                  p.M, p.N, p.K, config_.vec, config_.b_kn, p.in_h, p.in_w, p.in_c, p.cg, p.kw,
                                  p.stride_h, p.stride_w, p.pad_t, p.pad_l, p.dil_h, p.dil_w, p.out_h, p.out_w,
                                  p.a_batch_stride, p.b_batch_stride, p.c_batch_stride, p.ldb, p.ldc,
                                  p.residual != nullptr);
    // Two-level batches only (keys of every other geometry stay what tuning caches hold).
    if (p.batch_inner > 0) {
      key += fmt::format(" | {} {} {} {}", p.batch_inner, p.a_outer_stride, p.b_outer_stride, p.c_outer_stride);
    }
    if (p.n_segment > 0) key += fmt::format(" | segments {} {}", p.n_segment, p.c_segment_stride);
    return key;
  }

 private:
  GemmParams params_;
  GemmShape shape_;
  GemmConfig config_;
};

// An image stem: the pad kernel writes its input with kStemChannels channels into the workspace,
// then the implicit GEMM runs over the padded input and filter. Both check the flag, and the pad
// rewrites its whole buffer, so a restart from the pad is idempotent.
class StemConvLaunch final : public KernelLaunch {
 public:
  StemConvLaunch(const std::string& name, const PadChannelsParams& pad, const GemmParams& p, const DeviceInfo& dev)
      : KernelLaunch(name), pad_(pad), gemm_(name, p, /*vec=*/true, /*b_kn=*/false, dev) {}

  void launch(cudaStream_t stream, const int* flag) const override {
    launch_pad_channels(pad_, stream, flag, name().c_str());
    gemm_.launch(stream, flag);
  }
  // The pad is grid-stride; the whole is when its GEMM is (a GEMV), and then runs capped whole.
  bool grid_stride() const override { return gemm_.grid_stride(); }
  // Each slice pads the whole input again (a small kernel), so any order of slices, after any
  // other kernel's use of the workspace, reads what one launch reads.
  int64_t slice_units() const override { return gemm_.slice_units(); }
  void launch_slice(cudaStream_t stream, const int* flag, int64_t begin, int64_t end, int max_blocks) const override {
    if (grid_stride()) return KernelLaunch::launch_slice(stream, flag, begin, end, max_blocks);
    check_slice(begin, end, max_blocks);
    launch_pad_channels(pad_, stream, flag, name().c_str());
    gemm_.launch_slice(stream, flag, begin, end, max_blocks);
  }
  size_t workspace_bytes() const override { return padded_bytes() + gemm_.workspace_bytes(); }
  void bind_workspace(void* workspace) override {
    auto* base = static_cast<std::byte*>(workspace);
    pad_.y = reinterpret_cast<__half*>(base);
    gemm_.set_a(pad_.y);
    gemm_.bind_workspace(base + padded_bytes());
  }
  std::vector<GemmChoice> gemm_choices() const override { return gemm_.gemm_choices(); }
  GemmChoice gemm_choice() const override { return gemm_.gemm_choice(); }
  void set_gemm_choice(const GemmChoice& c) override { gemm_.set_gemm_choice(c); }
  size_t workspace_bytes_for(const GemmChoice& c) const override {
    return padded_bytes() + gemm_.workspace_bytes_for(c);
  }
  std::string tune_key() const override { return gemm_.tune_key(); }

 private:
  // Rounded up so the GEMM's split-K partials behind it stay aligned.
  size_t padded_bytes() const { return align_up(static_cast<size_t>(pad_.pixels) * kStemChannels * sizeof(__half)); }

  PadChannelsParams pad_;
  GemmLaunch gemm_;
};

// The window fields the direct and the GEMM convolution parameters share.
template <typename Params>
void set_conv_window(Params& p, const Conv2dParams& cp, int64_t oh, int64_t ow) {
  p.stride_h = static_cast<int>(cp.stride_h);
  p.stride_w = static_cast<int>(cp.stride_w);
  p.pad_t = static_cast<int>(cp.pad_t);
  p.pad_l = static_cast<int>(cp.pad_l);
  p.dil_h = static_cast<int>(cp.dil_h);
  p.dil_w = static_cast<int>(cp.dil_w);
  p.out_h = static_cast<int>(oh);
  p.out_w = static_cast<int>(ow);
}

std::unique_ptr<KernelLaunch> prepare_depthwise(const Kernel& k, const Conv2dParams& cp, const __half* x,
                                                const __half* wt, const float* bias, const __half* residual,
                                                __half* y) {
  const Shape& xs = k.inputs[0].shape;
  const Shape& ws = k.inputs[1].shape;
  const Shape& ys = k.outputs[0].shape;
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], o = ws[0], kh = ws[2], kw = ws[3];
  const int64_t oh = ys[2], ow = ys[3];
  DirectConvParams p;
  p.x = x;
  p.w = wt;
  p.bias = bias;
  p.residual = residual;
  p.y = y;
  p.n = static_cast<int>(n);
  p.h = static_cast<int>(h);
  p.w_in = static_cast<int>(w);
  p.c = static_cast<int>(c);
  p.o = static_cast<int>(o);
  p.kh = static_cast<int>(kh);
  p.kw = static_cast<int>(kw);
  set_conv_window(p, cp, oh, ow);
  p.act = act_code(k);
  return make_param_launch(k, p, launch_depthwise, Grid::kStride);
}

}  // namespace

std::unique_ptr<KernelLaunch> prepare_conv2d(const Kernel& k, const LoadContext& ctx) {
  const Conv2dParams cp = conv2d_params(k.attrs);
  expect_arity(k, 2 + (cp.has_bias ? 1 : 0) + (cp.has_residual ? 1 : 0), 1);
  const Binding& xb = k.inputs[0];
  const Binding& wb = k.inputs[1];
  const Binding& yb = k.outputs[0];
  expect_layout(xb, Layout::kNHWC, "input");
  expect_layout(yb, Layout::kNHWC, "output");
  ATOLL_CHECK(wb.kind == Binding::Kind::kWeight && wb.layout == Layout::kNHWC && wb.offset == 0, kUnsupported,
              "filter must be a whole weight stored [O, kh, kw, I/group]");
  const int64_t n = xb.shape[0], c = xb.shape[1], h = xb.shape[2], w = xb.shape[3];
  const int64_t o = wb.shape[0], cg = wb.shape[1], kh = wb.shape[2], kw = wb.shape[3];
  const int64_t oh = yb.shape[2], ow = yb.shape[3];
  const __half* x = half_in(k, ctx, 0, "input");
  const __half* wt = half_in(k, ctx, 1, "filter");
  __half* y = half_out(k, ctx, 0);
  const float* bias = cp.has_bias ? param_in(k, ctx, 2, "bias") : nullptr;
  const __half* residual = nullptr;
  if (cp.has_residual) {
    const size_t ri = k.inputs.size() - 1;
    expect_layout(k.inputs[ri], Layout::kNHWC, "residual");
    residual = half_in(k, ctx, ri, "residual");
  }
  checked_int(n * h * w * c, "input elements");
  checked_int(n * oh * ow * o, "output elements");

  if (is_depthwise_conv(k)) return prepare_depthwise(k, cp, x, wt, bias, residual, y);
  const bool stem = ctx.weight_format(wb.index) == WeightFormat::kChannelsPadded8;
  const int64_t ci = stem ? kStemChannels : c, cgi = stem ? kStemChannels : cg;

  GemmParams p;
  p.a = x;
  p.b = wt;
  p.c = y;
  p.bias = bias;
  p.residual = residual;
  p.batch = static_cast<int>(cp.group);
  p.M = checked_int(n * oh * ow, "M");
  p.N = static_cast<int>(o / cp.group);
  p.K = checked_int(kh * kw * cgi, "K");
  p.in_h = static_cast<int>(h);
  p.in_w = static_cast<int>(w);
  p.in_c = static_cast<int>(ci);
  p.cg = static_cast<int>(cgi);
  p.kw = static_cast<int>(kw);
  set_conv_window(p, cp, oh, ow);
  p.a_batch_stride = cgi;
  p.b_batch_stride = static_cast<int64_t>(p.N) * p.K;
  p.c_batch_stride = p.N;
  p.bias_batch_stride = p.N;
  p.ldb = p.K;
  p.ldc = static_cast<int>(o);
  p.act = act_code(k);
  if (stem) {
    ATOLL_CHECK(aligned16(wt), kUnsupported, "the padded stem filter is not 16-byte aligned");
    PadChannelsParams pad;
    pad.x = x;
    pad.pixels = n * h * w;
    pad.c = static_cast<int>(c);
    p.a = nullptr;  // the padded input in the workspace, bound later
    return std::make_unique<StemConvLaunch>(k.name, pad, p, ctx.device());
  }
  // 16-byte loads need every 8-channel run to stay inside one tap and one group.
  const bool vec = cg % 8 == 0 && c % 8 == 0 && aligned16(x) && aligned16(wt);
  return std::make_unique<GemmLaunch>(k.name, p, vec, false, ctx.device());
}

std::unique_ptr<KernelLaunch> prepare_gemm(const Kernel& k, const LoadContext& ctx) {
  const bool has_bias = k.attrs.get_int("bias", 0) != 0;
  const bool has_residual = k.attrs.get_int("residual", 0) != 0;
  expect_arity(k, 2 + (has_bias ? 1 : 0) + (has_residual ? 1 : 0), 1);
  const Binding& xb = k.inputs[0];
  const Binding& wb = k.inputs[1];
  expect_layout(xb, Layout::kRowMajor, "input");
  expect_layout(k.outputs[0], Layout::kRowMajor, "output");
  ATOLL_CHECK(wb.shape.rank() == 2, kUnsupported, "weight must be [N, K], is {}", wb.shape.str());
  const int64_t K = wb.shape[1], N = wb.shape[0];
  // Grouped: one GEMM over the stacked weights [groups * n, K], each n columns written as a
  // segment of the output [groups, M, n].
  const int64_t groups = k.attrs.get_int("groups", 1);
  ATOLL_CHECK(groups >= 1 && N % groups == 0 &&
                  (groups == 1 || (!has_residual && (N / groups) % kGemmSegmentColumns == 0)),
              kUnsupported, "kernel '{}': {} groups of weight {} (groups need {}k columns each and no residual)",
              k.name, groups, wb.shape.str(), kGemmSegmentColumns);
  GemmParams p;
  p.a = half_in(k, ctx, 0, "input");
  p.b = half_in(k, ctx, 1, "weight");
  p.c = half_out(k, ctx, 0);
  p.bias = has_bias ? param_in(k, ctx, 2, "bias") : nullptr;
  if (has_residual) {
    const size_t ri = k.inputs.size() - 1;
    expect_layout(k.inputs[ri], Layout::kRowMajor, "residual");
    p.residual = half_in(k, ctx, ri, "residual");
  }
  p.M = checked_int(xb.shape.numel() / K, "M");
  p.N = checked_int(N, "N");
  p.K = checked_int(K, "K");
  p.in_w = p.out_w = p.M;
  p.in_c = p.cg = p.K;
  p.ldb = p.K;
  p.ldc = p.N;
  if (groups > 1) {
    p.n_segment = checked_int(N / groups, "columns per group");
    p.ldc = p.n_segment;
    p.c_segment_stride = int64_t{p.M} * p.n_segment;
  }
  p.act = act_code(k);
  const bool vec = K % 8 == 0 && aligned16(p.a) && aligned16(p.b);
  return std::make_unique<GemmLaunch>(k.name, p, vec, false, ctx.device());
}

std::unique_ptr<KernelLaunch> prepare_matmul(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 2, 1);
  const Binding& ab = k.inputs[0];
  const Binding& bb = k.inputs[1];
  for (const Binding* b : {&ab, &bb, &k.outputs[0]}) expect_layout(*b, Layout::kRowMajor, "operand");
  const MatMulShapes s = matmul_shapes(k.attrs, ab.shape, bb.shape);
  ATOLL_CHECK(s.error.empty(), kUnsupported, "kernel '{}': {}", k.name, s.error);
  ATOLL_CHECK(k.outputs[0].shape == s.y_stored, kUnsupported, "kernel '{}': output {} is not {}", k.name,
              k.outputs[0].shape.str(), s.y_stored.str());
  const MatrixStrides a = matrix_strides(s.a, s.swap_a), b = matrix_strides(s.b, s.swap_b),
                      y = matrix_strides(s.y, s.swap_y);
  GemmParams p;
  p.a = half_in(k, ctx, 0, "a");
  p.b = half_in(k, ctx, 1, "b");
  p.c = half_out(k, ctx, 0);
  p.batch = checked_int(s.batch, "batch");
  p.M = checked_int(s.m, "M");
  p.N = checked_int(s.n, "N");
  p.K = checked_int(s.k, "K");
  p.in_w = p.out_w = p.M;
  p.cg = p.K;
  p.in_c = checked_int(a.ld, "row stride of a");  // elements between A's rows
  p.ldb = checked_int(b.ld, "row stride of b");
  p.ldc = checked_int(y.ld, "row stride of the output");
  p.a_batch_stride = a.inner_stride;
  p.b_batch_stride = b.inner_stride;
  p.c_batch_stride = y.inner_stride;
  if (s.swap_a || s.swap_b || s.swap_y) {
    p.batch_inner = checked_int(a.inner, "heads");
    p.a_outer_stride = a.outer_stride;
    p.b_outer_stride = b.outer_stride;
    p.c_outer_stride = y.outer_stride;
  }
  p.alpha = static_cast<float>(k.attrs.get_float("alpha", 1.0));
  checked_int(s.batch * s.m * s.n, "output elements");
  // 16-byte loads need every row and matrix of A and B to start on a 16-byte boundary.
  const bool strides8 = p.in_c % 8 == 0 && p.ldb % 8 == 0 && a.inner_stride % 8 == 0 && b.inner_stride % 8 == 0 &&
                        a.outer_stride % 8 == 0 && b.outer_stride % 8 == 0;
  const bool vec =
      p.K % 8 == 0 && (s.trans_b || p.N % 8 == 0) && strides8 && aligned16(p.a) && aligned16(p.b);
  return std::make_unique<GemmLaunch>(k.name, p, vec, !s.trans_b, ctx.device());
}

std::unique_ptr<KernelLaunch> prepare_attention(const Kernel& k, const LoadContext& ctx) {
  expect_arity(k, 3, 1);
  for (const Binding* b : {&k.inputs[0], &k.inputs[1], &k.inputs[2], &k.outputs[0]}) {
    expect_layout(*b, Layout::kRowMajor, "operand");
  }
  const AttentionShapes s = attention_shapes(k.attrs, k.inputs[0].shape, k.inputs[1].shape, k.inputs[2].shape);
  ATOLL_CHECK(s.error.empty(), kUnsupported, "kernel '{}': {}", k.name, s.error);
  ATOLL_CHECK(k.outputs[0].shape == s.context.y_stored, kUnsupported, "kernel '{}': output {} is not {}", k.name,
              k.outputs[0].shape.str(), s.context.y_stored.str());
  AttentionArgs p;
  p.matrices = checked_int(s.scores.batch, "batch x heads");
  p.queries = checked_int(s.scores.m, "queries");
  p.keys = checked_int(s.scores.n, "keys");
  p.head_dim = checked_int(s.scores.k, "head size");
  p.value_dim = checked_int(s.context.n, "value head size");
  ATOLL_CHECK(p.keys >= 1 && p.keys <= kAttentionMaxKeys && p.head_dim <= kAttentionMaxHeadDim &&
                  p.value_dim <= kAttentionMaxHeadDim && p.matrices <= 65535,
              kUnsupported, "kernel '{}': attention over {} keys with heads of {} and {} in {} matrices (1 to {} "
              "keys, heads of at most {}, 65535 matrices)", k.name, p.keys, p.head_dim, p.value_dim, p.matrices,
              kAttentionMaxKeys, kAttentionMaxHeadDim);
  const size_t smem = ctx.device().smem_optin;
  p.tile_rows = attention_tile_rows(p.queries, p.head_dim, p.value_dim, smem);
  ATOLL_CHECK(p.tile_rows > 0, kUnsupported, "kernel '{}': attention with heads of {} and {} does not fit one "
              "block's {} bytes of shared memory", k.name, p.head_dim, p.value_dim, smem);
  p.tile_rows = attention_grid_rows(p.tile_rows, p.matrices, p.queries, ctx.device().sm_count);
  p.q = half_in(k, ctx, 0, "q");
  p.k = half_in(k, ctx, 1, "k");
  p.v = half_in(k, ctx, 2, "v");
  p.y = half_out(k, ctx, 0);
  const auto strides = [](const Shape& logical, bool swapped) {
    const MatrixStrides m = matrix_strides(logical, swapped);
    return HeadStrides{m.inner, m.outer_stride, m.inner_stride, m.ld};
  };
  p.qs = strides(s.scores.a, s.scores.swap_a);
  p.ks = strides(s.scores.b, s.scores.swap_b);
  p.vs = strides(s.context.b, s.context.swap_b);
  p.ys = strides(s.context.y, s.context.swap_y);
  p.scale = static_cast<float>(k.attrs.get_float("scale", 1.0));
  // 16-byte accesses need every row of every matrix to start on a 16-byte boundary.
  const auto rows8 = [](const HeadStrides& h) { return h.ld % 8 == 0 && h.inner_stride % 8 == 0 && h.outer_stride % 8 == 0; };
  p.vec = p.head_dim % 8 == 0 && p.value_dim % 8 == 0 && rows8(p.qs) && rows8(p.ks) && rows8(p.vs) && rows8(p.ys) &&
          aligned16(p.q) && aligned16(p.k) && aligned16(p.v) && aligned16(p.y);
  prepare_attention_kernels(smem);
  return make_param_launch(k, p, launch_attention, Grid::kFixed);
}

}  // namespace atl::cuda
