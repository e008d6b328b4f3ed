#pragma once
#include <string_view>

namespace atl {

// Every operator the IR knows. Compiled kernels use the same kinds; fused epilogues are
// attributes ("act", "bias", "residual"), not separate kinds.
enum class OpKind {
  kConv2d,         // in: x, w[O, I/g, kh, kw], [bias], [residual]; attrs stride, pads, dilation, group, act
  kBatchNorm,      // in: x, gamma, beta, mean, var; attrs epsilon, act
  kRelu,
  kRelu6,
  kGelu,           // exact (erf) GELU
  kTanh,
  kAdd,            // NumPy broadcasting; attr act
  kMul,            // NumPy broadcasting
  kMaxPool,        // attrs kernel, stride, pads, ceil_mode
  kAvgPool,        // attrs kernel, stride, pads, ceil_mode, count_include_pad
  kGlobalAvgPool,  // [N, C, H, W] -> [N, C, 1, 1]
  kConcat,         // attr axis
  kFlatten,        // attr axis (default 1)
  kReshape,        // attr shape (-1 allowed once)
  kTranspose,      // attr perm
  kGemm,           // in: x[..., K], w[N, K], [bias[N]], [residual]; attr act. y = x w^T + b
  kMatMul,         // in: a[..., M, K], b[..., K, N] (or [..., N, K] with trans_b); attrs trans_b, alpha;
                   // a_swap12 / b_swap12 / y_swap12: that rank-4 operand is stored with dims 1, 2 swapped
  kSoftmax,        // attr axis
  kLayerNorm,      // in: x, gamma, beta over the last axis; attr epsilon
  kGather,         // in: table[V, D], indices (int) -> [..., D]
  kSlice,          // attrs axes, starts, ends, steps
  kDropout,        // identity at inference; removed by the compiler
  kLayoutToNHWC,   // compiler-inserted: NCHW -> NHWC
  kLayoutToNCHW,   // compiler-inserted: NHWC -> NCHW
  kScaleShift,     // compiler-inserted (unfoldable BatchNorm): in: x, scale[C], shift[C]; attr act
  // Ops that imported ONNX models need beyond the zoo's (CPU: math_ops.cpp; CUDA: elementwise.cu, math.cu).
  kSub,            // NumPy broadcasting, a - b
  kDiv,            // NumPy broadcasting, a / b
  kPow,            // NumPy broadcasting, a ^ b
  kSigmoid,
  kHardSigmoid,    // max(0, min(1, alpha x + beta)); attrs alpha, beta
  kHardSwish,      // x * hard_sigmoid(x) with alpha 1/6, beta 1/2
  kErf,
  kSqrt,
  kClip,           // attrs min, max (either may be absent: unbounded)
  kReduceMean,     // attrs axes (non-negative, ascending), keepdims
  kCast,           // attr to (dtype name): integers <-> floats by value
  // Compiler-inserted (CompileTarget::fused_attention): softmax(scale q k^T) v in one kernel, the
  // MatMul -> Softmax(last axis) -> MatMul chain it replaces. in: q[B, H, S, D], k[B, H, T, D],
  // v[B, H, T, Dv] (logical); attrs scale, q_swap12 / k_swap12 / v_swap12 / y_swap12 as MatMul's.
  kAttention,
  kCount,
};

std::string_view op_name(OpKind op);
OpKind op_from_name(std::string_view name);  // throws kParse

// One float input, one output of its shape, each element on its own (activations, Sigmoid, Clip, ...).
bool is_unary_elementwise(OpKind op);
// Two float inputs under NumPy broadcasting: Add, Sub, Mul, Div, Pow.
bool is_binary_elementwise(OpKind op);

// Activation fused into an epilogue.
enum class Act { kNone, kRelu, kRelu6, kGelu, kTanh };
std::string_view act_name(Act a);
Act act_from_name(std::string_view name);

}  // namespace atl
