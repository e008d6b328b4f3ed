// Matrix products: the threaded Eigen-backed gemm helper, and the Gemm and MatMul kernels.
// Eigen runs single-threaded; gemm() splits the work itself, so threads never wait on each
// other inside a product (Eigen's own threading spins on shared packing, which stalls badly
// when a core is busy with something else).
#define EIGEN_DONT_PARALLELIZE
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"

namespace atl::cpu {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MatrixMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

// Products below this many multiply-adds run on one thread.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

// One block of C: rows [r0, r1), columns [c0, c1), product then epilogue.
void gemm_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, bool trans_b, float* c, int64_t ldc, const Epilogue& ep) {
  if (r1 <= r0 || c1 <= c0) return;
  const int64_t rows = r1 - r0, cols = c1 - c0;
  ConstMatrixMap am(a + r0 * lda, rows, k, Eigen::OuterStride<>(lda));
  MatrixMap cm(c + r0 * ldc + c0, rows, cols, Eigen::OuterStride<>(ldc));
  if (trans_b) {
    ConstMatrixMap bm(b + c0 * ldb, cols, k, Eigen::OuterStride<>(ldb));
    if (alpha == 1.0f) {
      cm.noalias() = am * bm.transpose();
    } else {
      cm.noalias() = (alpha * am) * bm.transpose();
    }
  } else {
    ConstMatrixMap bm(b + c0, k, cols, Eigen::OuterStride<>(ldb));
    if (alpha == 1.0f) {
      cm.noalias() = am * bm;
    } else {
      cm.noalias() = (alpha * am) * bm;
    }
  }
  if (ep.bias == nullptr && ep.residual == nullptr && ep.act == Act::kNone) return;
  with_act(ep.act, [&]<Act A>() {
    for (int64_t r = r0; r < r1; ++r) {
      epilogue_row<A>(c + r * ldc + c0, cols, ep.bias != nullptr ? ep.bias + c0 : nullptr,
                      ep.residual != nullptr ? ep.residual + r * ldc + c0 : nullptr);
    }
  });
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
          bool trans_b, float* c, int64_t ldc, const Epilogue& epilogue) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads == 1 || m * n * k < kParallelMacs) {
    gemm_block(0, m, 0, n, k, alpha, a, lda, b, ldb, trans_b, c, ldc, epilogue);
    return;
  }
  // Rows when there are enough to keep every thread's block tall; columns otherwise (a GEMV
  // or a late, spatially small conv layer), in multiples of 16 to keep SIMD stores whole.
  const bool split_rows = m >= 8 * threads;
  const int64_t span = split_rows ? m : n;
  const int64_t align = split_rows ? 1 : 16;
  const int64_t step = ((span + threads - 1) / threads + align - 1) / align * align;
#pragma omp parallel num_threads(threads)
  {
    const int64_t lo = std::min(span, omp_get_thread_num() * step);
    const int64_t hi = std::min(span, lo + step);
    if (split_rows) {
      gemm_block(lo, hi, 0, n, k, alpha, a, lda, b, ldb, trans_b, c, ldc, epilogue);
    } else {
      gemm_block(0, m, lo, hi, k, alpha, a, lda, b, ldb, trans_b, c, ldc, epilogue);
    }
  }
}

namespace {

// --- Gemm: y = act(x w^T + bias + residual), x [..., K], w [N, K] ----------------------------

struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false, has_residual = false;
  Act act = Act::kNone;
};

KernelPlan validate_gemm(const Kernel& k) {
  GemmPlan p;
  p.has_bias = k.attrs.get_int("bias", 0) != 0;
  p.has_residual = k.attrs.get_int("residual", 0) != 0;
  p.act = act_from_name(k.attrs.get_string("act", "none"));
  expect_arity(k, 2 + (p.has_bias ? 1 : 0) + (p.has_residual ? 1 : 0), 1);
  expect_f32(k);
  const Binding& x = k.inputs[0];
  const Binding& w = k.inputs[1];
  const Binding& y = k.outputs[0];
  ATOLL_CHECK(x.shape.rank() >= 2 && w.shape.rank() == 2, kUnsupported, "needs x [..., K] and w [N, K], got {} and {}",
              x.shape.str(), w.shape.str());
  for (const auto* b : {&x, &w, &y}) expect_layout(*b, Layout::kRowMajor, "operand");
  p.k = w.shape[1];
  p.n = w.shape[0];
  ATOLL_CHECK(x.shape.dim(-1) == p.k, kUnsupported, "x {} does not match w {}", x.shape.str(), w.shape.str());
  p.m = x.shape.numel() / p.k;
  std::vector<int64_t> out = x.shape.dims();
  out.back() = p.n;
  expect_shape(y, Shape(out), "output");
  size_t next = 2;
  if (p.has_bias) expect_shape(k.inputs[next++], Shape{p.n}, "bias");
  if (p.has_residual) {
    expect_shape(k.inputs[next], Shape(out), "residual");
    expect_layout(k.inputs[next], Layout::kRowMajor, "residual");
  }
  return {p, 0};
}

void run_gemm(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<GemmPlan>(&plan.params);
  Epilogue ep;
  size_t next = 2;
  if (p.has_bias) ep.bias = args.in_f32(next++);
  if (p.has_residual) ep.residual = args.in_f32(next);
  ep.act = p.act;
  gemm(p.m, p.n, p.k, 1.0f, args.in_f32(0), p.k, args.in_f32(1), p.k, true, args.out_f32(0), p.n, ep);
}

// --- MatMul: y = alpha * a b (or a b^T), batched over equal leading dimensions ----------------

struct MatMulPlan {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_b = false;
  float alpha = 1.0f;
};

KernelPlan validate_matmul(const Kernel& k) {
  expect_arity(k, 2, 1);
  expect_f32(k);
  MatMulPlan p;
  p.trans_b = k.attrs.get_int("trans_b", 0) != 0;
  p.alpha = static_cast<float>(k.attrs.get_float("alpha", 1.0));
  const Binding& a = k.inputs[0];
  const Binding& b = k.inputs[1];
  const Binding& y = k.outputs[0];
  for (const auto* t : {&a, &b, &y}) expect_layout(*t, Layout::kRowMajor, "operand");
  const int r = a.shape.rank();
  ATOLL_CHECK(r >= 2 && b.shape.rank() == r, kUnsupported, "needs equal ranks >= 2, got {} and {}", a.shape.str(),
              b.shape.str());
  for (int d = 0; d < r - 2; ++d) {
    ATOLL_CHECK(a.shape[d] == b.shape[d], kUnsupported, "batch dimensions differ: {} vs {}", a.shape.str(),
                b.shape.str());
    p.batch *= a.shape[d];
  }
  p.m = a.shape[r - 2];
  p.k = a.shape[r - 1];
  p.n = p.trans_b ? b.shape[r - 2] : b.shape[r - 1];
  ATOLL_CHECK((p.trans_b ? b.shape[r - 1] : b.shape[r - 2]) == p.k, kUnsupported, "inner dimensions differ: {} x {}{}",
              a.shape.str(), b.shape.str(), p.trans_b ? "^T" : "");
  std::vector<int64_t> out = a.shape.dims();
  out.back() = p.n;
  expect_shape(y, Shape(out), "output");
  return {p, 0};
}

void run_matmul(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<MatMulPlan>(&plan.params);
  const float* a = args.in_f32(0);
  const float* b = args.in_f32(1);
  float* y = args.out_f32(0);
  const int64_t ldb = p.trans_b ? p.k : p.n;
  // Many small products (attention heads): one product per thread beats splitting each one.
#pragma omp parallel for schedule(static) if (p.batch > 1)
  for (int64_t i = 0; i < p.batch; ++i) {
    const float* ai = a + i * p.m * p.k;
    const float* bi = b + i * p.k * p.n;
    float* yi = y + i * p.m * p.n;
    gemm(p.m, p.n, p.k, p.alpha, ai, p.k, bi, ldb, p.trans_b, yi, p.n);
  }
}

}  // namespace

void register_gemm_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kGemm)] = {validate_gemm, run_gemm};
  r[static_cast<size_t>(OpKind::kMatMul)] = {validate_matmul, run_matmul};
}

}  // namespace atl::cpu
