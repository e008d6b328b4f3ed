// Conv2d in NHWC with weights stored [O, kh, kw, I/group]. Three paths: a 1x1 stride-1 conv is
// one GEMM over the pixels; depthwise is a direct loop; everything else is im2col (rows = output
// pixels, cols = kh*kw*I/group, in the weights' order) then one GEMM per group, in row tiles so
// the column buffer stays small. The epilogue adds bias and residual and applies the activation.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"
#include "ir/op_attrs.h"

namespace atl::cpu {

namespace {

// Column buffer budget per tile, in floats (8 MiB): large enough for efficient GEMMs, small
// enough that VGG-sized layers do not need hundreds of MiB of scratch.
constexpr int64_t kColumnBudget = int64_t{2} << 20;

enum class ConvPath { kPointwise, kDepthwise, kIm2col };

struct ConvPlan {
  Conv2dParams p;
  ConvPath path = ConvPath::kIm2col;
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t o = 0, kh = 0, kw = 0;       // weight
  int64_t oh = 0, ow = 0;              // output
  int64_t cg = 0, og = 0;              // channels per group
  int64_t rows = 0;                    // output pixels, n * oh * ow
  int64_t k = 0;                       // GEMM depth, kh * kw * cg
  int64_t tile_rows = 0;               // im2col rows per pass
  int64_t column_floats = 0;           // workspace for one column tile; GEMM packing follows it
};

KernelPlan validate_conv(const Kernel& kernel, int threads) {
  ConvPlan p;
  p.p = conv2d_params(kernel.attrs);
  const Conv2dParams& a = p.p;
  expect_arity(kernel, 2 + (a.has_bias ? 1 : 0) + (a.has_residual ? 1 : 0), 1);
  expect_f32(kernel);
  const Binding& x = kernel.inputs[0];
  const Binding& w = kernel.inputs[1];
  const Binding& y = kernel.outputs[0];
  ATOLL_CHECK(x.shape.rank() == 4 && w.shape.rank() == 4, kUnsupported, "needs 4-D input and weight, got {} and {}",
              x.shape.str(), w.shape.str());
  expect_layout(x, Layout::kNHWC, "input");
  expect_layout(w, Layout::kNHWC, "weight");
  expect_layout(y, Layout::kNHWC, "output");
  p.n = x.shape[0];
  p.c = x.shape[1];
  p.h = x.shape[2];
  p.w = x.shape[3];
  p.o = w.shape[0];
  p.kh = w.shape[2];
  p.kw = w.shape[3];
  ATOLL_CHECK(a.group >= 1 && p.c % a.group == 0 && p.o % a.group == 0 && w.shape[1] * a.group == p.c, kUnsupported,
              "weight {} with group {} does not fit input {}", w.shape.str(), a.group, x.shape.str());
  ATOLL_CHECK(a.stride_h > 0 && a.stride_w > 0 && a.dil_h > 0 && a.dil_w > 0, kUnsupported,
              "stride and dilation must be positive");
  p.cg = p.c / a.group;
  p.og = p.o / a.group;
  p.oh = pool_out_size(p.h, p.kh, a.stride_h, a.pad_t, a.pad_b, a.dil_h, false);
  p.ow = pool_out_size(p.w, p.kw, a.stride_w, a.pad_l, a.pad_r, a.dil_w, false);
  expect_shape(y, Shape{p.n, p.o, p.oh, p.ow}, "output");
  size_t next = 2;
  if (a.has_bias) expect_shape(kernel.inputs[next++], Shape{p.o}, "bias");
  if (a.has_residual) {
    expect_shape(kernel.inputs[next], y.shape, "residual");
    expect_layout(kernel.inputs[next], Layout::kNHWC, "residual");
  }
  p.rows = p.n * p.oh * p.ow;
  p.k = p.kh * p.kw * p.cg;
  const bool unit_window = p.kh == 1 && p.kw == 1 && a.stride_h == 1 && a.stride_w == 1 && a.pad_t == 0 &&
                           a.pad_l == 0 && a.pad_b == 0 && a.pad_r == 0;
  int64_t workspace = 0;
  if (unit_window && a.group == 1) {
    p.path = ConvPath::kPointwise;
    workspace = gemm_workspace_bytes(p.rows, p.o, p.c, threads);
  } else if (a.group == p.c && a.group == p.o) {
    p.path = ConvPath::kDepthwise;
    workspace = p.kh * p.kw * p.c * static_cast<int64_t>(sizeof(float));  // weights as [kh, kw, C]
  } else {
    p.path = ConvPath::kIm2col;
    p.tile_rows = std::min(p.rows, std::max(kColumnBudget / p.k, int64_t{16}));
    // Whole cache lines, so the packing buffers behind the columns stay aligned.
    p.column_floats = (p.tile_rows * p.k + 15) / 16 * 16;
    const int64_t last_tile = p.rows - (p.rows - 1) / p.tile_rows * p.tile_rows;
    workspace = p.column_floats * static_cast<int64_t>(sizeof(float)) +
                std::max(gemm_workspace_bytes(p.tile_rows, p.og, p.k, threads),
                         gemm_workspace_bytes(last_tile, p.og, p.k, threads));
  }
  return {p, workspace};
}

// Copies the receptive fields of output pixels [row0, row0 + count) for one group into `cols`.
void im2col(const ConvPlan& p, const float* x, int64_t group, int64_t row0, int64_t count, float* cols) {
  const Conv2dParams& a = p.p;
  const size_t span = static_cast<size_t>(p.cg) * sizeof(float);
  parallel_for(count, count * p.k, [&](int64_t r) {
    const int64_t pixel = row0 + r;
    const int64_t ox = pixel % p.ow;
    const int64_t oy = (pixel / p.ow) % p.oh;
    const int64_t b = pixel / (p.ow * p.oh);
    float* dst = cols + r * p.k;
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t iy = oy * a.stride_h - a.pad_t + i * a.dil_h;
      for (int64_t j = 0; j < p.kw; ++j, dst += p.cg) {
        const int64_t ix = ox * a.stride_w - a.pad_l + j * a.dil_w;
        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) {
          std::memset(dst, 0, span);
        } else {
          std::memcpy(dst, x + ((b * p.h + iy) * p.w + ix) * p.c + group * p.cg, span);
        }
      }
    }
  });
}

void run_depthwise(const ConvPlan& p, const float* x, const float* w, const float* bias, const float* residual,
                   float* y, float* taps_by_channel) {
  const Conv2dParams& a = p.p;
  const int64_t taps = p.kh * p.kw;
  for (int64_t c = 0; c < p.c; ++c) {
    for (int64_t t = 0; t < taps; ++t) taps_by_channel[t * p.c + c] = w[c * taps + t];
  }
  with_act(a.act, [&]<Act A>() {
    parallel_for(p.n * p.oh, p.rows * p.c, [&](int64_t row) {
      const int64_t b = row / p.oh, oy = row % p.oh;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        const int64_t pixel = row * p.ow + ox;
        float* out = y + pixel * p.c;
        std::fill(out, out + p.c, 0.0f);
        for (int64_t i = 0; i < p.kh; ++i) {
          const int64_t iy = oy * a.stride_h - a.pad_t + i * a.dil_h;
          if (iy < 0 || iy >= p.h) continue;
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ix = ox * a.stride_w - a.pad_l + j * a.dil_w;
            if (ix < 0 || ix >= p.w) continue;
            const float* in = x + ((b * p.h + iy) * p.w + ix) * p.c;
            const float* wt = taps_by_channel + (i * p.kw + j) * p.c;
            for (int64_t c = 0; c < p.c; ++c) out[c] += in[c] * wt[c];
          }
        }
        epilogue_row<A>(out, p.c, bias, residual != nullptr ? residual + pixel * p.c : nullptr);
      }
    });
  });
}

void run_conv(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<ConvPlan>(&plan.params);
  const float* x = args.in_f32(0);
  const float* w = args.in_f32(1);
  size_t next = 2;
  const float* bias = p.p.has_bias ? args.in_f32(next++) : nullptr;
  const float* residual = p.p.has_residual ? args.in_f32(next) : nullptr;
  float* y = args.out_f32(0);
  auto* scratch = reinterpret_cast<float*>(args.workspace);
  switch (p.path) {
    case ConvPath::kPointwise:
      gemm(p.rows, p.o, p.c, 1.0f, x, p.c, w, p.c, true, y, p.o, Epilogue{bias, residual, p.p.act}, args.threads,
           scratch);
      return;
    case ConvPath::kDepthwise:
      run_depthwise(p, x, w, bias, residual, y, scratch);
      return;
    case ConvPath::kIm2col:
      for (int64_t row0 = 0; row0 < p.rows; row0 += p.tile_rows) {
        const int64_t count = std::min(p.tile_rows, p.rows - row0);
        for (int64_t g = 0; g < p.p.group; ++g) {
          im2col(p, x, g, row0, count, scratch);
          const int64_t col0 = g * p.og;
          const Epilogue ep{bias != nullptr ? bias + col0 : nullptr,
                            residual != nullptr ? residual + row0 * p.o + col0 : nullptr, p.p.act};
          gemm(count, p.og, p.k, 1.0f, scratch, p.k, w + col0 * p.k, p.k, true, y + row0 * p.o + col0, p.o, ep,
               args.threads, scratch + p.column_floats);
        }
      }
      return;
  }
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kConv2d)] = {validate_conv, run_conv};
}

}  // namespace atl::cpu
