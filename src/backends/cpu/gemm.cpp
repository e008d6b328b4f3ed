// Matrix products: the threaded gemm helper over Eigen's blocked kernel, and the Gemm, MatMul
// and Attention kernels. Eigen runs single-threaded with packing buffers taken from the instance's
// workspace (its usual path allocates them on every product); gemm() splits the work across
// threads itself, so threads never wait on each other inside a product (Eigen's own threading
// spins on shared packing, which stalls badly when a core is busy with something else).
#define EIGEN_DONT_PARALLELIZE
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_math.h"
#include "backends/cpu/kernel_registry.h"
#include "ir/op_attrs.h"

namespace atl::cpu {

namespace {

using Eigen::Index;

// Products below this many multiply-adds run on one thread.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// Eigen's cache blocking for one product, with its two packing buffers in caller memory.
// Dimensions are those of Eigen's column-major view of our row-major C = A op(B): its rows are
// our columns (n) and its columns our rows (m).
class WorkspaceBlocking : public Eigen::internal::level3_blocking<float, float> {
 public:
  WorkspaceBlocking(int64_t m, int64_t n, int64_t k) {
    m_mc = n;
    m_nc = m;
    m_kc = k;
    Eigen::internal::computeProductBlockingSizes<float, float, 1, Index>(m_kc, m_mc, m_nc, 1);
  }
  // Floats for both buffers, each rounded to whole cache lines (the packed panels are read with
  // aligned SIMD loads).
  int64_t floats() const { return round_up(m_kc * m_mc, 16) + round_up(m_kc * m_nc, 16); }
  void attach(float* buffer) {
    m_blockA = buffer;
    m_blockB = buffer + round_up(m_kc * m_mc, 16);
  }
};

// How gemm() divides C among threads: `threads` blocks of `step` rows (or columns).
struct Split {
  int threads = 1;
  bool rows = true;
  int64_t step = 0;
};

Split split_for(int64_t m, int64_t n, int64_t k, int threads) {
  Split s;
  if (threads <= 1 || m * n * k < kParallelMacs) {
    s.step = m;
    return s;
  }
  s.threads = threads;
  // Rows when there are enough to keep every thread's block tall; columns otherwise (a GEMV,
  // a late, spatially small conv layer), in multiples of 16 to keep SIMD stores whole.
  s.rows = m >= 8 * threads;
  const int64_t span = s.rows ? m : n;
  const int64_t align = s.rows ? 1 : 16;
  s.step = round_up((span + threads - 1) / threads, align);
  return s;
}

// Packing floats one thread needs for any block of the split (the last block may be smaller).
int64_t per_thread_floats(const Split& s, int64_t m, int64_t n, int64_t k) {
  if (m == 1) return 0;  // the GEMV path packs nothing
  const int64_t span = s.rows ? m : n;
  const int64_t last = span - std::min(span, (s.threads - 1) * s.step);
  int64_t most = 0;
  for (int64_t block : {std::min(span, s.step), last}) {
    if (block <= 0) continue;
    most = std::max(most, s.rows ? WorkspaceBlocking(block, n, k).floats() : WorkspaceBlocking(m, block, k).floats());
  }
  return round_up(most, 16);
}

// One row of A times op(B): y[j] += alpha * dot(a, B[j, :]) (or column j of B).
void gemv_block(int64_t c0, int64_t c1, int64_t k, float alpha, const float* a, const float* b, int64_t ldb,
                bool trans_b, float* y) {
  if (trans_b) {
    for (int64_t j = c0; j < c1; ++j) {
      const float* row = b + j * ldb;
      // Eight partial sums let the compiler vectorize without reassociating a single sum.
      float part[8] = {};
      int64_t kk = 0;
      for (; kk + 8 <= k; kk += 8) {
        for (int l = 0; l < 8; ++l) part[l] += a[kk + l] * row[kk + l];
      }
      float acc = 0.0f;
      for (; kk < k; ++kk) acc += a[kk] * row[kk];
      for (float v : part) acc += v;
      y[j] += alpha * acc;
    }
  } else {
    for (int64_t kk = 0; kk < k; ++kk) {
      const float scale = alpha * a[kk];
      const float* row = b + kk * ldb;
      for (int64_t j = c0; j < c1; ++j) y[j] += scale * row[j];
    }
  }
}

// One block of C: rows [r0, r1), columns [c0, c1). C starts as bias + residual, the product is
// accumulated into it, then the activation is applied while the block is in cache.
void gemm_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, bool trans_b, float* c, int64_t ldc, const Epilogue& ep, float* packing) {
  if (r1 <= r0 || c1 <= c0) return;
  const int64_t rows = r1 - r0, cols = c1 - c0;
  for (int64_t r = r0; r < r1; ++r) {
    float* out = c + r * ldc + c0;
    const float* res = ep.residual != nullptr ? ep.residual + r * ldc + c0 : nullptr;
    for (int64_t j = 0; j < cols; ++j) {
      out[j] = (ep.bias != nullptr ? ep.bias[c0 + j] : 0.0f) + (res != nullptr ? res[j] : 0.0f);
    }
  }
  const float* a0 = a + r0 * lda;
  const float* b0 = trans_b ? b + c0 * ldb : b + c0;
  float* c00 = c + r0 * ldc + c0;
  if (rows == 1) {
    gemv_block(0, cols, k, alpha, a0, b0, ldb, trans_b, c00);
  } else {
    WorkspaceBlocking blocking(rows, cols, k);
    blocking.attach(packing);
    using namespace Eigen::internal;
    if (trans_b) {
      general_matrix_matrix_product<Index, float, Eigen::RowMajor, false, float, Eigen::ColMajor, false,
                                    Eigen::RowMajor, 1>::run(rows, cols, k, a0, lda, b0, ldb, c00, 1, ldc, alpha,
                                                             blocking, nullptr);
    } else {
      general_matrix_matrix_product<Index, float, Eigen::RowMajor, false, float, Eigen::RowMajor, false,
                                    Eigen::RowMajor, 1>::run(rows, cols, k, a0, lda, b0, ldb, c00, 1, ldc, alpha,
                                                             blocking, nullptr);
    }
  }
  if (ep.act == Act::kNone) return;
  with_act(ep.act, [&]<Act A>() {
    for (int64_t r = r0; r < r1; ++r) epilogue_row<A>(c + r * ldc + c0, cols, nullptr, nullptr);
  });
}

}  // namespace

int64_t gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int threads) {
  const Split s = split_for(m, n, k, threads);
  return s.threads * per_thread_floats(s, m, n, k) * static_cast<int64_t>(sizeof(float));
}

void gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
          bool trans_b, float* c, int64_t ldc, const Epilogue& epilogue, int threads, float* workspace) {
  // The split, and with it each block's packing slot, is the one the workspace was sized for.
  const Split s = split_for(m, n, k, threads);
  const int64_t stride = per_thread_floats(s, m, n, k);
  const int64_t span = s.rows ? m : n;
  auto block = [&](int t) {
    const int64_t lo = std::min(span, t * s.step);
    const int64_t hi = std::min(span, lo + s.step);
    float* packing = workspace + t * stride;
    if (s.rows) {
      gemm_block(lo, hi, 0, n, k, alpha, a, lda, b, ldb, trans_b, c, ldc, epilogue, packing);
    } else {
      gemm_block(0, m, lo, hi, k, alpha, a, lda, b, ldb, trans_b, c, ldc, epilogue, packing);
    }
  };
  if (s.threads == 1 || omp_in_parallel()) {
    for (int t = 0; t < s.threads; ++t) block(t);
    return;
  }
#pragma omp parallel num_threads(s.threads)
  {
    // A smaller team than asked for (thread limits) still covers every block.
    for (int t = omp_get_thread_num(); t < s.threads; t += omp_get_num_threads()) block(t);
  }
}

namespace {

// --- Gemm: y = act(x w^T + bias + residual), x [..., K], w [N, K] ----------------------------

struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t groups = 1;  // attr groups: weights [groups * n, k], outputs [groups, m, n]
  bool has_bias = false, has_residual = false;
  Act act = Act::kNone;
};

KernelPlan validate_gemm(const Kernel& k, int threads) {
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
  p.groups = k.attrs.get_int("groups", 1);
  ATOLL_CHECK(p.groups >= 1 && w.shape[0] % p.groups == 0 && (p.groups == 1 || !p.has_residual), kUnsupported,
              "groups {} do not divide w {}, or come with a residual", p.groups, w.shape.str());
  p.k = w.shape[1];
  p.n = w.shape[0] / p.groups;
  ATOLL_CHECK(x.shape.dim(-1) == p.k, kUnsupported, "x {} does not match w {}", x.shape.str(), w.shape.str());
  p.m = x.shape.numel() / p.k;
  std::vector<int64_t> out = x.shape.dims();
  out.back() = p.n;
  if (p.groups > 1) out.insert(out.begin(), p.groups);
  expect_shape(y, Shape(out), "output");
  size_t next = 2;
  if (p.has_bias) expect_shape(k.inputs[next++], Shape{p.groups * p.n}, "bias");
  if (p.has_residual) {
    expect_shape(k.inputs[next], Shape(out), "residual");
    expect_layout(k.inputs[next], Layout::kRowMajor, "residual");
  }
  return {p, gemm_workspace_bytes(p.m, p.n, p.k, threads)};
}

void run_gemm(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<GemmPlan>(&plan.params);
  Epilogue ep;
  size_t next = 2;
  if (p.has_bias) ep.bias = args.in_f32(next++);
  if (p.has_residual) ep.residual = args.in_f32(next);
  ep.act = p.act;
  const float* bias = ep.bias;
  for (int64_t g = 0; g < p.groups; ++g) {
    if (bias != nullptr) ep.bias = bias + g * p.n;
    gemm(p.m, p.n, p.k, 1.0f, args.in_f32(0), p.k, args.in_f32(1) + g * p.n * p.k, p.k, true,
         args.out_f32(0) + g * p.m * p.n, p.n, ep, args.threads, reinterpret_cast<float*>(args.workspace));
  }
}

// --- MatMul: y = alpha * a b (or a b^T), batched over equal leading dimensions ----------------

struct MatMulPlan {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool trans_b = false;
  float alpha = 1.0f;
  MatrixStrides a, b, y;  // where each operand's matrix i starts (matrix_strides)
};

MatMulPlan plan_matmul(const MatMulShapes& s, float alpha) {
  MatMulPlan p;
  p.trans_b = s.trans_b;
  p.alpha = alpha;
  p.batch = s.batch;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.a = matrix_strides(s.a, s.swap_a);
  p.b = matrix_strides(s.b, s.swap_b);
  p.y = matrix_strides(s.y, s.swap_y);
  return p;
}

// Many small products (attention heads) run one per thread, each with its own packing space;
// a single product splits across the threads instead.
int64_t matmul_workspace_bytes(const MatMulPlan& p, int threads) {
  return p.batch > 1 ? threads * gemm_workspace_bytes(p.m, p.n, p.k, 1) : gemm_workspace_bytes(p.m, p.n, p.k, threads);
}

void matmul(const MatMulPlan& p, const float* a, const float* b, float* y, int threads, float* workspace) {
  if (p.batch == 1) {
    gemm(p.m, p.n, p.k, p.alpha, a, p.a.ld, b, p.b.ld, p.trans_b, y, p.y.ld, {}, threads, workspace);
    return;
  }
  const int64_t slot = gemm_workspace_bytes(p.m, p.n, p.k, 1) / static_cast<int64_t>(sizeof(float));
  auto product = [&](int64_t i, float* packing) {
    gemm(p.m, p.n, p.k, p.alpha, a + p.a.offset(i), p.a.ld, b + p.b.offset(i), p.b.ld, p.trans_b, y + p.y.offset(i),
         p.y.ld, {}, 1, packing);
  };
  // No region for one thread: libgomp allocates a team even for a serialized one.
  if (threads == 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < p.batch; ++i) product(i, workspace);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < p.batch; ++i) product(i, workspace + omp_get_thread_num() * slot);
}

KernelPlan validate_matmul(const Kernel& k, int threads) {
  expect_arity(k, 2, 1);
  expect_f32(k);
  const Binding& a = k.inputs[0];
  const Binding& b = k.inputs[1];
  const Binding& y = k.outputs[0];
  for (const auto* t : {&a, &b, &y}) expect_layout(*t, Layout::kRowMajor, "operand");
  const MatMulShapes s = matmul_shapes(k.attrs, a.shape, b.shape);
  ATOLL_CHECK(s.error.empty(), kUnsupported, "{}", s.error);
  expect_shape(y, s.y_stored, "output");
  const MatMulPlan p = plan_matmul(s, static_cast<float>(k.attrs.get_float("alpha", 1.0)));
  return {p, matmul_workspace_bytes(p, threads)};
}

void run_matmul(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<MatMulPlan>(&plan.params);
  matmul(p, args.in_f32(0), args.in_f32(1), args.out_f32(0), args.threads, reinterpret_cast<float*>(args.workspace));
}

// --- Attention: softmax(scale q k^T) v, the scores in the workspace ----------------------------

struct AttentionPlan {
  MatMulPlan scores, context;
  int64_t packing_floats = 0;  // the products' packing space, ahead of the scores
};

KernelPlan validate_attention(const Kernel& k, int threads) {
  expect_arity(k, 3, 1);
  expect_f32(k);
  for (const Binding* t : {&k.inputs[0], &k.inputs[1], &k.inputs[2], &k.outputs[0]}) {
    expect_layout(*t, Layout::kRowMajor, "operand");
  }
  const AttentionShapes s = attention_shapes(k.attrs, k.inputs[0].shape, k.inputs[1].shape, k.inputs[2].shape);
  ATOLL_CHECK(s.error.empty(), kUnsupported, "{}", s.error);
  expect_shape(k.outputs[0], s.context.y_stored, "output");
  AttentionPlan p;
  p.scores = plan_matmul(s.scores, static_cast<float>(k.attrs.get_float("scale", 1.0)));
  p.context = plan_matmul(s.context, 1.0f);
  const int64_t packing = std::max(matmul_workspace_bytes(p.scores, threads), matmul_workspace_bytes(p.context, threads));
  p.packing_floats = round_up(packing, 64) / static_cast<int64_t>(sizeof(float));
  const int64_t scores_bytes = s.scores.y.numel() * static_cast<int64_t>(sizeof(float));
  return {p, p.packing_floats * static_cast<int64_t>(sizeof(float)) + scores_bytes};
}

void run_attention(const Kernel&, const KernelPlan& plan, const KernelArgs& args) {
  const auto& p = *std::any_cast<AttentionPlan>(&plan.params);
  auto* packing = reinterpret_cast<float*>(args.workspace);
  float* scores = packing + p.packing_floats;
  matmul(p.scores, args.in_f32(0), args.in_f32(1), scores, args.threads, packing);
  const int64_t rows = p.scores.batch * p.scores.m, len = p.scores.n;
  parallel_for(rows, rows * len, [&](int64_t row) {
    float* x = scores + row * len;
    const float max = *std::max_element(x, x + len);
    double sum = 0.0;
    for (int64_t i = 0; i < len; ++i) {
      x[i] = std::exp(x[i] - max);
      sum += x[i];
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < len; ++i) x[i] *= inv;
  });
  matmul(p.context, scores, args.in_f32(2), args.out_f32(0), args.threads, packing);
}

}  // namespace

void register_gemm_kernels(KernelRegistry& r) {
  r[static_cast<size_t>(OpKind::kGemm)] = {validate_gemm, run_gemm};
  r[static_cast<size_t>(OpKind::kMatMul)] = {validate_matmul, run_matmul};
  r[static_cast<size_t>(OpKind::kAttention)] = {validate_attention, run_attention};
}

}  // namespace atl::cpu
