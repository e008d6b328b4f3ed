// MaxPool, AvgPool and GlobalAvgPool on NHWC tensors: the channel row of each pixel is
// contiguous, so every window tap is one vectorizable pass over C floats.
#include <algorithm>
#include <limits>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"
#include "ir/op_attrs.h"

namespace atl::cpu {

namespace {

struct PoolPlan {
  PoolParams p;
  bool max = true;
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
};

KernelPlan validate_pool(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  PoolPlan p;
  p.p = pool_params(k.attrs);
  p.max = k.op == OpKind::kMaxPool;
  const Binding& x = k.inputs[0];
  ATOLL_CHECK(x.shape.rank() == 4, kUnsupported, "input must be 4-D, is {}", x.shape.str());
  expect_layout(x, Layout::kNHWC, "input");
  expect_layout(k.outputs[0], Layout::kNHWC, "output");
  ATOLL_CHECK(p.p.k_h > 0 && p.p.k_w > 0 && p.p.stride_h > 0 && p.p.stride_w > 0, kUnsupported,
              "kernel and stride must be positive");
  p.n = x.shape[0];
  p.c = x.shape[1];
  p.h = x.shape[2];
  p.w = x.shape[3];
  p.oh = pool_out_size(p.h, p.p.k_h, p.p.stride_h, p.p.pad_t, p.p.pad_b, 1, p.p.ceil_mode);
  p.ow = pool_out_size(p.w, p.p.k_w, p.p.stride_w, p.p.pad_l, p.p.pad_r, 1, p.p.ceil_mode);
  expect_shape(k.outputs[0], Shape{p.n, p.c, p.oh, p.ow}, "output");
  return {p, 0};
}

void run_pool(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<PoolPlan>(&plan.params);
  const PoolParams& a = p.p;
  const float* x = args.in_f32(0);
  float* y = args.out_f32(0);
  parallel_for(p.n * p.oh, p.n * p.oh * p.ow * p.c, [&](int64_t row) {
    const int64_t b = row / p.oh, oy = row % p.oh;
    // Window clipped to the padded input (PyTorch's divisor with count_include_pad), then to the input.
    const int64_t y0 = oy * a.stride_h - a.pad_t;
    const int64_t y1 = std::min(y0 + a.k_h, p.h + a.pad_b);
    const int64_t iy0 = std::max<int64_t>(y0, 0), iy1 = std::min(y1, p.h);
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t x0 = ox * a.stride_w - a.pad_l;
      const int64_t x1 = std::min(x0 + a.k_w, p.w + a.pad_r);
      const int64_t ix0 = std::max<int64_t>(x0, 0), ix1 = std::min(x1, p.w);
      float* out = y + (row * p.ow + ox) * p.c;
      std::fill(out, out + p.c, p.max ? -std::numeric_limits<float>::infinity() : 0.0f);
      for (int64_t iy = iy0; iy < iy1; ++iy) {
        for (int64_t ix = ix0; ix < ix1; ++ix) {
          const float* in = x + ((b * p.h + iy) * p.w + ix) * p.c;
          if (p.max) {
            // PyTorch's max pool propagates NaN; std::max would keep the running maximum.
            for (int64_t c = 0; c < p.c; ++c) out[c] = (in[c] > out[c] || std::isnan(in[c])) ? in[c] : out[c];
          } else {
            for (int64_t c = 0; c < p.c; ++c) out[c] += in[c];
          }
        }
      }
      if (!p.max) {
        const int64_t count = a.count_include_pad ? (y1 - y0) * (x1 - x0) : (iy1 - iy0) * (ix1 - ix0);
        const float inv = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
        for (int64_t c = 0; c < p.c; ++c) out[c] *= inv;
      }
    }
  });
}

// --- GlobalAvgPool: [N, C, H, W] -> [N, C, 1, 1] ------------------------------------------------

struct GlobalPoolPlan {
  int64_t n = 0, c = 0, pixels = 0;
};

KernelPlan validate_global_pool(const Kernel& k, int) {
  expect_arity(k, 1, 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  ATOLL_CHECK(x.shape.rank() == 4, kUnsupported, "input must be 4-D, is {}", x.shape.str());
  expect_layout(x, Layout::kNHWC, "input");
  // [N, C, 1, 1] has the same bytes in either layout, so the output may be marked either way.
  expect_shape(k.outputs[0], Shape{x.shape[0], x.shape[1], 1, 1}, "output");
  return {GlobalPoolPlan{x.shape[0], x.shape[1], x.shape[2] * x.shape[3]}, 0};
}

void run_global_pool(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<GlobalPoolPlan>(&plan.params);
  const float* x = args.in_f32(0);
  float* y = args.out_f32(0);
  const double inv = 1.0 / static_cast<double>(p.pixels);
  parallel_for(p.n * p.c, p.n * p.c * p.pixels, [&](int64_t nc) {
    const int64_t b = nc / p.c, c = nc % p.c;
    const float* in = x + b * p.pixels * p.c + c;
    double sum = 0.0;
    for (int64_t i = 0; i < p.pixels; ++i) sum += in[i * p.c];
    y[nc] = static_cast<float>(sum * inv);
  });
}

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kMaxPool)] = {validate_pool, run_pool};
  r[static_cast<size_t>(OpKind::kAvgPool)] = {validate_pool, run_pool};
  r[static_cast<size_t>(OpKind::kGlobalAvgPool)] = {validate_global_pool, run_global_pool};
}

}  // namespace atl::cpu
