#pragma once
// Numeric building blocks shared by the CPU kernel families: activations, the conv/gemm
// epilogue and row-major matrix products on raw buffers.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ir/op.h"

namespace atl::cpu {

// Work below this many elements runs on one thread: forking costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 14;
// Elements per parallel chunk of a flat loop.
constexpr int64_t kChunk = 1 << 14;

// Runs body(i) for i in [0, n): across the OpenMP threads when `work` (elements touched) is worth
// it, else inline. The serial case never enters a parallel region: libgomp allocates a team even
// for a region whose if-clause is false, and run() must not allocate.
template <typename F>
inline void parallel_for(int64_t n, int64_t work, F&& body) {
  if (n > 1 && work > kParallelGrain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

template <Act A>
inline float activate(float x) {
  // Written so NaN fails the comparison and passes through, as in PyTorch.
  if constexpr (A == Act::kRelu) return x <= 0.0f ? 0.0f : x;
  if constexpr (A == Act::kRelu6) return x <= 0.0f ? 0.0f : (x >= 6.0f ? 6.0f : x);
  // Exact GELU, not the tanh approximation.
  if constexpr (A == Act::kGelu) return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  if constexpr (A == Act::kTanh) return std::tanh(x);
  return x;
}

// Calls f.template operator()<A>() with the compile-time activation matching `act`, so inner
// loops are specialized instead of switching per element.
template <typename F>
inline void with_act(Act act, F&& f) {
  switch (act) {
    case Act::kNone:
      f.template operator()<Act::kNone>();
      break;
    case Act::kRelu:
      f.template operator()<Act::kRelu>();
      break;
    case Act::kRelu6:
      f.template operator()<Act::kRelu6>();
      break;
    case Act::kGelu:
      f.template operator()<Act::kGelu>();
      break;
    case Act::kTanh:
      f.template operator()<Act::kTanh>();
      break;
  }
}

// One row of the conv/gemm epilogue: y = act(y + bias + residual); bias/residual may be null.
template <Act A>
inline void epilogue_row(float* y, int64_t n, const float* bias, const float* residual) {
  for (int64_t c = 0; c < n; ++c) {
    float v = y[c];
    if (bias != nullptr) v += bias[c];
    if (residual != nullptr) v += residual[c];
    y[c] = activate<A>(v);
  }
}

// What a matrix product does to its result before returning: C = act(C + bias[col] + residual).
struct Epilogue {
  const float* bias = nullptr;      // [n]
  const float* residual = nullptr;  // same shape and leading dimension as C
  Act act = Act::kNone;
};

// C[m, n] = epilogue(alpha * A[m, k] * op(B)), row-major with leading dimensions; op(B) is B[n, k]
// transposed when trans_b, else B[k, n]. Splits rows (or columns, when rows are few) over
// `threads` OpenMP threads, each running a single-threaded Eigen product and its share of the
// epilogue while the block is still in cache; inside a parallel region it runs on the calling
// thread. `workspace` holds gemm_workspace_bytes(m, n, k, threads) for Eigen's packing buffers.
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
          bool trans_b, float* c, int64_t ldc, const Epilogue& epilogue, int threads, float* workspace);
int64_t gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int threads);

}  // namespace atl::cpu
