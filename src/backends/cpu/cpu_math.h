#pragma once
// Numeric building blocks shared by the CPU kernel families: activations, the conv/gemm
// epilogue and row-major matrix products on raw buffers.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ir/op.h"

namespace atl::cpu {

// Work below this many elements runs on one thread: forking costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 14;

template <Act A>
inline float activate(float x) {
  if constexpr (A == Act::kRelu) return x > 0.0f ? x : 0.0f;
  if constexpr (A == Act::kRelu6) return std::min(std::max(x, 0.0f), 6.0f);
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
    case Act::kNone: f.template operator()<Act::kNone>(); break;
    case Act::kRelu: f.template operator()<Act::kRelu>(); break;
    case Act::kRelu6: f.template operator()<Act::kRelu6>(); break;
    case Act::kGelu: f.template operator()<Act::kGelu>(); break;
    case Act::kTanh: f.template operator()<Act::kTanh>(); break;
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

// y[i] = act(x[i]) for n elements; x may equal y.
void apply_act(Act act, const float* x, float* y, int64_t n);

// In place on a rows x cols block with row stride ld: y = act(y + bias[col] + residual[row, col]).
// bias and residual may be null; the residual has the same row stride as y.
void apply_epilogue(float* y, int64_t rows, int64_t cols, int64_t ld, const float* bias, const float* residual,
                    Act act);

// C[m, n] = alpha * sum_k A[m, k] * B[n, k]  (B transposed), row-major with leading dimensions.
// Uses every OpenMP thread, or one when called inside a parallel region.
void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc);
// C[m, n] = alpha * sum_k A[m, k] * B[k, n], row-major with leading dimensions.
void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
             float* c, int64_t ldc);

}  // namespace atl::cpu
