#pragma once
// Decoded attribute bundles shared by shape inference, the compiler and every backend.
#include <cstdint>
#include <string>

#include "core/shape.h"

#include "ir/attrs.h"
#include "ir/op.h"

namespace atl {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t group = 1;
  Act act = Act::kNone;
  bool has_bias = false;
  bool has_residual = false;
};
Conv2dParams conv2d_params(const Attrs& a);

struct PoolParams {
  int64_t k_h = 1, k_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};
PoolParams pool_params(const Attrs& a);

// A MatMul's operands as stored and as multiplied. With a_swap12 / b_swap12 / y_swap12 a rank-4
// operand is stored [d0, d1, d2, d3] and multiplied as [d0, d2, d1, d3]: attention reads Q, K, V
// in the [batch, seq, heads, head_dim] layout the projections write, and writes the context
// back in it, without a transpose kernel on either side.
struct MatMulShapes {
  Shape a, b, y;   // logical: a[..., M, K], b[..., K, N] or [..., N, K], y[..., M, N]
  Shape y_stored;  // y as stored (y with dims 1, 2 swapped under y_swap12)
  bool swap_a = false, swap_b = false, swap_y = false;
  bool trans_b = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  std::string error;  // empty when the shapes agree
};
MatMulShapes matmul_shapes(const Attrs& attrs, const Shape& a_stored, const Shape& b_stored);

// An Attention's two products as MatMuls: scores = scale q k^T ([B, H, S, T], stored plain), then
// context = softmax(scores) v, stored as y_swap12 says. `error` is empty when the shapes agree
// (rank-4 operands, k and v with as many keys).
struct AttentionShapes {
  MatMulShapes scores, context;
  std::string error;
};
Attrs attention_scores_attrs(const Attrs& attention);
Attrs attention_context_attrs(const Attrs& attention);
AttentionShapes attention_shapes(const Attrs& attrs, const Shape& q_stored, const Shape& k_stored,
                                 const Shape& v_stored);

// Where matrix i of a batched MatMul operand starts, as a two-level batch: i = i0 * inner + i1,
// offset = i0 * outer_stride + i1 * inner_stride, rows ld elements apart (inner = the logical
// dim 1 of rank-4 operands, else the whole batch). Stored with dims 1, 2 swapped, heads are
// ld / d3 apart within a row.
struct MatrixStrides {
  int64_t inner = 1, outer_stride = 0, inner_stride = 0, ld = 0;
  int64_t offset(int64_t i) const { return (i / inner) * outer_stride + (i % inner) * inner_stride; }
};
MatrixStrides matrix_strides(const Shape& logical, bool swapped);

// Output length of a sliding window (convolution or pooling), PyTorch's ceil_mode rule included.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t pad_lo, int64_t pad_hi, int64_t dil, bool ceil_mode);

}  // namespace atl
