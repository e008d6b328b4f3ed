// The op case list and the construction of each case's one-kernel Program.
#include "op_cases.h"

#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "core/rng.h"
#include "ir/graph.h"
#include "ir/op_attrs.h"

namespace atl::opcases {

Operand act_input(std::string name, Shape shape, Layout layout, float scale) {
  Operand o;
  o.name = std::move(name);
  o.shape = std::move(shape);
  o.layout = layout;
  o.scale = scale;
  return o;
}

Operand param(std::string name, Shape shape, Layout layout, float scale) {
  Operand o = act_input(std::move(name), std::move(shape), layout, scale);
  o.role = Operand::Role::kWeight;
  return o;
}

namespace {

using Ints = std::vector<int64_t>;

Operand index_input(std::string name, Shape shape, int64_t limit) {
  Operand o = act_input(std::move(name), std::move(shape));
  o.dtype = DType::kI64;
  o.index_limit = limit;
  return o;
}

// Values with unit-ish variance after a dot product of `fan_in` terms.
float fan_in_scale(int64_t fan_in) {
  return std::sqrt(3.0f / static_cast<float>(fan_in));
}

Tensor random_tensor(const Operand& o, uint64_t seed, bool round_to_f16) {
  Tensor t(o.dtype, o.shape);
  Rng rng(seed, o.name);
  if (o.dtype == DType::kI64) {
    for (auto& v : t.as<int64_t>()) v = static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(o.index_limit));
    return t;
  }
  if (o.dtype == DType::kI32) {
    for (auto& v : t.as<int32_t>()) v = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(o.index_limit));
    return t;
  }
  for (auto& v : t.as<float>()) {
    v = rng.uniform(o.positive ? 0.0f : -o.scale, o.scale) + o.offset;
    if (round_to_f16) v = round_to_half(v);
  }
  return t;
}

// Storage bytes of a logical tensor: rank-4 NHWC reorders [A, B, C, D] to [A, C, D, B] (images
// NCHW -> NHWC, conv weights OIHW -> OHWI). The tensor keeps its logical shape, as the compiler's do.
Tensor to_storage(const Tensor& logical, Layout layout) {
  if (layout != Layout::kNHWC || logical.shape().rank() != 4) return logical.clone();
  Tensor t(logical.dtype(), logical.shape());
  const Shape& s = logical.shape();
  const int64_t a = s[0], b = s[1], plane = s[2] * s[3];
  const auto src = logical.as<float>();
  auto dst = t.as<float>();
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      for (int64_t p = 0; p < plane; ++p) {
        dst[static_cast<size_t>((i * plane + p) * b + j)] = src[static_cast<size_t>((i * b + j) * plane + p)];
      }
    }
  }
  return t;
}

// --- case families ------------------------------------------------------------------------------

struct ConvSpec {
  std::string name;
  int64_t n = 1, c = 4, h = 9, w = 9, o = 4, kh = 3, kw = 3;
  Ints stride{1, 1}, pads{0, 0, 0, 0}, dilation{1, 1};
  int64_t group = 1;
  bool bias = false, residual = false;
  std::string act = "none";
};

OpCase conv_case(const ConvSpec& s) {
  OpCase c;
  c.name = "conv_" + s.name;
  c.op = OpKind::kConv2d;
  c.out_layout = Layout::kNHWC;
  c.attrs = Attrs{{"stride", s.stride}, {"pads", s.pads},          {"dilation", s.dilation},
                  {"group", s.group},   {"bias", int64_t{s.bias}}, {"residual", int64_t{s.residual}},
                  {"act", s.act}};
  const int64_t cg = s.c / s.group;
  c.operands.push_back(act_input("x", Shape{s.n, s.c, s.h, s.w}, Layout::kNHWC));
  c.operands.push_back(param("w", Shape{s.o, cg, s.kh, s.kw}, Layout::kNHWC, fan_in_scale(cg * s.kh * s.kw)));
  if (s.bias) c.operands.push_back(param("bias", Shape{s.o}, Layout::kRowMajor, 0.5f));
  if (s.residual) {
    const int64_t oh = pool_out_size(s.h, s.kh, s.stride[0], s.pads[0], s.pads[2], s.dilation[0], false);
    const int64_t ow = pool_out_size(s.w, s.kw, s.stride[1], s.pads[1], s.pads[3], s.dilation[1], false);
    c.operands.push_back(act_input("residual", Shape{s.n, s.o, oh, ow}, Layout::kNHWC));
  }
  return c;
}

void add_conv_cases(std::vector<OpCase>& cases) {
  auto spec = [](std::string name) {
    ConvSpec s;
    s.name = std::move(name);
    return s;
  };
  ConvSpec s = spec("3x3_s1_p1_bias_relu");
  s.c = 5, s.h = 9, s.w = 11, s.o = 7, s.pads = {1, 1, 1, 1}, s.bias = true, s.act = "relu";
  cases.push_back(conv_case(s));
  s = spec("3x3_s2_p1_batch2");
  s.n = 2, s.c = 4, s.h = 13, s.w = 10, s.o = 6, s.stride = {2, 2}, s.pads = {1, 1, 1, 1}, s.bias = true;
  cases.push_back(conv_case(s));
  s = spec("7x7_s2_p3_stem");
  s.c = 3, s.h = 23, s.w = 19, s.o = 8, s.kh = s.kw = 7, s.stride = {2, 2}, s.pads = {3, 3, 3, 3};
  s.bias = true, s.act = "relu";
  cases.push_back(conv_case(s));
  s = spec("1x7_p0_3");
  s.c = 6, s.h = 7, s.w = 9, s.o = 5, s.kh = 1, s.kw = 7, s.pads = {0, 3, 0, 3}, s.bias = true, s.act = "relu";
  cases.push_back(conv_case(s));
  s = spec("7x1_p3_0");
  s.c = 6, s.h = 9, s.w = 7, s.o = 5, s.kh = 7, s.kw = 1, s.pads = {3, 0, 3, 0};
  cases.push_back(conv_case(s));
  s = spec("3x3_asymmetric_pads");
  s.c = 3, s.h = 8, s.w = 7, s.o = 4, s.pads = {0, 1, 2, 0}, s.stride = {1, 2};
  cases.push_back(conv_case(s));
  s = spec("3x3_dilation2");
  s.c = 6, s.h = 12, s.w = 10, s.o = 4, s.pads = {2, 2, 2, 2}, s.dilation = {2, 2}, s.bias = true, s.act = "tanh";
  cases.push_back(conv_case(s));
  s = spec("3x3_group2_residual_relu6");
  s.c = 8, s.h = 7, s.w = 6, s.o = 6, s.pads = {1, 1, 1, 1}, s.group = 2, s.bias = true, s.residual = true;
  s.act = "relu6";
  cases.push_back(conv_case(s));
  s = spec("depthwise_3x3_s1_relu6");
  s.c = 12, s.h = 9, s.w = 8, s.o = 12, s.pads = {1, 1, 1, 1}, s.group = 12, s.bias = true, s.act = "relu6";
  cases.push_back(conv_case(s));
  s = spec("depthwise_3x3_s2_residual");
  s.n = 2, s.c = 5, s.h = 11, s.w = 10, s.o = 5, s.pads = {1, 1, 1, 1}, s.stride = {2, 2}, s.group = 5;
  s.residual = true;
  cases.push_back(conv_case(s));
  s = spec("depthwise_5x5_dilation2");
  s.c = 7, s.h = 13, s.w = 12, s.o = 7, s.kh = s.kw = 5, s.pads = {4, 4, 4, 4}, s.dilation = {2, 2}, s.group = 7;
  cases.push_back(conv_case(s));
  s = spec("1x1_bias_residual_relu");
  s.c = 16, s.h = 5, s.w = 7, s.o = 24, s.kh = s.kw = 1, s.bias = true, s.residual = true, s.act = "relu";
  cases.push_back(conv_case(s));
  s = spec("1x1_no_bias_gelu");
  s.n = 2, s.c = 9, s.h = 3, s.w = 5, s.o = 11, s.kh = s.kw = 1, s.act = "gelu";
  cases.push_back(conv_case(s));
  s = spec("1x1_s2_downsample");
  s.c = 8, s.h = 9, s.w = 7, s.o = 16, s.kh = s.kw = 1, s.stride = {2, 2}, s.bias = true;
  cases.push_back(conv_case(s));
  s = spec("1x1_group4");
  s.c = 8, s.h = 4, s.w = 5, s.o = 12, s.kh = s.kw = 1, s.group = 4;
  cases.push_back(conv_case(s));
  // 32x32 outputs with K = 2304 span two column tiles of the CPU im2col path.
  s = spec("3x3_wide_tiled");
  s.c = 256, s.h = 32, s.w = 32, s.o = 8, s.pads = {1, 1, 1, 1}, s.bias = true, s.act = "relu";
  cases.push_back(conv_case(s));
}

OpCase pool_case(std::string name, OpKind op, Shape x, Attrs attrs) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.attrs = std::move(attrs);
  c.out_layout = Layout::kNHWC;
  c.operands.push_back(act_input("x", std::move(x), Layout::kNHWC));
  return c;
}

void add_pool_cases(std::vector<OpCase>& cases) {
  cases.push_back(pool_case("maxpool_3x3_s2_p1", OpKind::kMaxPool, Shape{1, 5, 12, 11},
                            {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}));
  cases.push_back(pool_case("maxpool_2x2_s2_ceil", OpKind::kMaxPool, Shape{2, 3, 7, 9},
                            {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}));
  cases.push_back(pool_case(
      "maxpool_3x3_s2_ceil_p1", OpKind::kMaxPool, Shape{1, 4, 10, 8},
      {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}}));
  cases.push_back(pool_case("avgpool_3x3_s1_p1_include_pad", OpKind::kAvgPool, Shape{1, 6, 7, 8},
                            {{"kernel", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}));
  cases.push_back(pool_case("avgpool_3x3_s2_p1_exclude_pad_ceil", OpKind::kAvgPool, Shape{2, 3, 10, 9},
                            {{"kernel", Ints{3, 3}},
                             {"stride", Ints{2, 2}},
                             {"pads", Ints{1, 1, 1, 1}},
                             {"ceil_mode", int64_t{1}},
                             {"count_include_pad", int64_t{0}}}));
  cases.push_back(pool_case(
      "avgpool_3x3_s2_ceil_include_pad", OpKind::kAvgPool, Shape{1, 3, 8, 8},
      {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}}));
  cases.push_back(pool_case("avgpool_2x2_s2", OpKind::kAvgPool, Shape{1, 7, 8, 6},
                            {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}}));
  cases.push_back(pool_case("global_avgpool", OpKind::kGlobalAvgPool, Shape{2, 7, 5, 6}, {}));
}

OpCase simple_case(std::string name, OpKind op, Attrs attrs, std::vector<Operand> operands,
                   Layout out_layout = Layout::kRowMajor) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.attrs = std::move(attrs);
  c.operands = std::move(operands);
  c.out_layout = out_layout;
  return c;
}

void add_elementwise_cases(std::vector<OpCase>& cases) {
  const Shape s{3, 17, 5};
  cases.push_back(simple_case("relu", OpKind::kRelu, {}, {act_input("x", s)}));
  cases.push_back(simple_case("relu6", OpKind::kRelu6, {}, {act_input("x", s, Layout::kRowMajor, 8.0f)}));
  cases.push_back(simple_case("gelu", OpKind::kGelu, {}, {act_input("x", s, Layout::kRowMajor, 4.0f)}));
  cases.push_back(simple_case("tanh", OpKind::kTanh, {}, {act_input("x", s, Layout::kRowMajor, 3.0f)}));
  cases.push_back(
      simple_case("relu_nhwc", OpKind::kRelu, {}, {act_input("x", Shape{2, 5, 3, 4}, Layout::kNHWC)}, Layout::kNHWC));
  cases.push_back(simple_case("relu_large", OpKind::kRelu, {}, {act_input("x", Shape{3, 50000})}));
  cases.push_back(simple_case("add_same_shape_relu", OpKind::kAdd, {{"act", std::string("relu")}},
                              {act_input("a", Shape{4, 9, 7}), act_input("b", Shape{4, 9, 7})}));
  cases.push_back(
      simple_case("add_nhwc", OpKind::kAdd, {},
                  {act_input("a", Shape{2, 6, 5, 3}, Layout::kNHWC), act_input("b", Shape{2, 6, 5, 3}, Layout::kNHWC)},
                  Layout::kNHWC));
  cases.push_back(simple_case("add_broadcast_rank3_into_rank4", OpKind::kAdd, {},
                              {act_input("a", Shape{2, 3, 4, 5}), act_input("b", Shape{3, 1, 5})}));
  cases.push_back(simple_case("add_broadcast_both", OpKind::kAdd, {},
                              {act_input("a", Shape{2, 1, 4, 1}), act_input("b", Shape{1, 3, 1, 5})}));
  cases.push_back(simple_case("add_attention_mask", OpKind::kAdd, {},
                              {act_input("scores", Shape{2, 4, 6, 6}), act_input("mask", Shape{2, 1, 1, 6})}));
  cases.push_back(
      simple_case("add_bias_weight", OpKind::kAdd, {}, {act_input("a", Shape{3, 5, 16}), param("bias", Shape{16})}));
  cases.push_back(
      simple_case("mul_broadcast_last", OpKind::kMul, {}, {act_input("a", Shape{4, 6, 5}), act_input("b", Shape{5})}));
  cases.push_back(simple_case("mul_broadcast_channel", OpKind::kMul, {},
                              {act_input("a", Shape{2, 3, 8, 8}), act_input("b", Shape{1, 3, 1, 1})}));
  cases.push_back(simple_case("mul_scalar", OpKind::kMul, {}, {act_input("a", Shape{1}), act_input("b", Shape{7, 3})}));
  cases.push_back(simple_case(
      "scale_shift_nhwc_relu", OpKind::kScaleShift, {{"act", std::string("relu")}},
      {act_input("x", Shape{2, 6, 5, 7}, Layout::kNHWC), param("scale", Shape{6}), param("shift", Shape{6})},
      Layout::kNHWC));
  cases.push_back(simple_case("scale_shift_rank3", OpKind::kScaleShift, {},
                              {act_input("x", Shape{2, 6, 5}), param("scale", Shape{6}), param("shift", Shape{6})}));
  cases.push_back(simple_case("scale_shift_rank2_tanh", OpKind::kScaleShift, {{"act", std::string("tanh")}},
                              {act_input("x", Shape{3, 6}), param("scale", Shape{6}), param("shift", Shape{6})}));
}

void add_data_cases(std::vector<OpCase>& cases) {
  cases.push_back(
      simple_case("concat_channels_nhwc", OpKind::kConcat, {{"axis", int64_t{1}}},
                  {act_input("a", Shape{2, 3, 5, 6}, Layout::kNHWC), act_input("b", Shape{2, 5, 5, 6}, Layout::kNHWC),
                   act_input("c", Shape{2, 2, 5, 6}, Layout::kNHWC)},
                  Layout::kNHWC));
  cases.push_back(
      simple_case("concat_height_nhwc", OpKind::kConcat, {{"axis", int64_t{2}}},
                  {act_input("a", Shape{1, 3, 2, 4}, Layout::kNHWC), act_input("b", Shape{1, 3, 5, 4}, Layout::kNHWC)},
                  Layout::kNHWC));
  cases.push_back(simple_case("concat_last_axis", OpKind::kConcat, {{"axis", int64_t{-1}}},
                              {act_input("a", Shape{2, 3, 4}), act_input("b", Shape{2, 3, 5})}));
  cases.push_back(simple_case("concat_axis0_with_weight", OpKind::kConcat, {{"axis", int64_t{0}}},
                              {param("cls", Shape{1, 8}), act_input("tokens", Shape{5, 8})}));
  cases.push_back(simple_case("transpose_heads", OpKind::kTranspose, {{"perm", Ints{0, 2, 1, 3}}},
                              {act_input("x", Shape{2, 7, 3, 5})}));
  cases.push_back(simple_case("transpose_general", OpKind::kTranspose, {{"perm", Ints{3, 1, 0, 2}}},
                              {act_input("x", Shape{2, 3, 4, 5})}));
  cases.push_back(
      simple_case("transpose_2d", OpKind::kTranspose, {{"perm", Ints{1, 0}}}, {act_input("x", Shape{9, 13})}));
  cases.push_back(
      simple_case("slice_steps_negative_start", OpKind::kSlice,
                  {{"axes", Ints{1, 2}}, {"starts", Ints{1, -5}}, {"ends", Ints{9, 100}}, {"steps", Ints{3, 2}}},
                  {act_input("x", Shape{4, 10, 6})}));
  cases.push_back(simple_case("slice_first_token", OpKind::kSlice,
                              {{"axes", Ints{1}}, {"starts", Ints{0}}, {"ends", Ints{1}}},
                              {act_input("x", Shape{2, 9, 16})}));
  cases.push_back(
      simple_case("slice_channels_nhwc", OpKind::kSlice,
                  {{"axes", Ints{1, 3}}, {"starts", Ints{2, 1}}, {"ends", Ints{7, 6}}, {"steps", Ints{1, 2}}},
                  {act_input("x", Shape{2, 8, 6, 6}, Layout::kNHWC)}, Layout::kNHWC));
  cases.push_back(simple_case("gather_embedding", OpKind::kGather, {},
                              {param("table", Shape{50, 16}), index_input("ids", Shape{2, 7}, 50)}));
  cases.push_back(
      simple_case("layout_to_nhwc", OpKind::kLayoutToNHWC, {}, {act_input("x", Shape{2, 5, 4, 3})}, Layout::kNHWC));
  cases.push_back(
      simple_case("layout_to_nchw", OpKind::kLayoutToNCHW, {}, {act_input("x", Shape{2, 37, 6, 7}, Layout::kNHWC)}));
}

void add_gemm_norm_cases(std::vector<OpCase>& cases) {
  auto gemm_attrs = [](bool bias, bool residual, const char* act) {
    return Attrs{{"bias", int64_t{bias}}, {"residual", int64_t{residual}}, {"act", std::string(act)}};
  };
  cases.push_back(simple_case("gemm_2d_bias", OpKind::kGemm, gemm_attrs(true, false, "none"),
                              {act_input("x", Shape{5, 37}),
                               param("w", Shape{11, 37}, Layout::kRowMajor, fan_in_scale(37)), param("b", Shape{11})}));
  cases.push_back(
      simple_case("gemm_3d_bias_residual_gelu", OpKind::kGemm, gemm_attrs(true, true, "gelu"),
                  {act_input("x", Shape{2, 7, 33}), param("w", Shape{19, 33}, Layout::kRowMajor, fan_in_scale(33)),
                   param("b", Shape{19}), act_input("residual", Shape{2, 7, 19})}));
  cases.push_back(
      simple_case("gemm_no_bias_tanh", OpKind::kGemm, gemm_attrs(false, false, "tanh"),
                  {act_input("x", Shape{1, 64}), param("w", Shape{10, 64}, Layout::kRowMajor, fan_in_scale(64))}));
  // Three Gemms of one input as one (the compiler's grouping of Q, K and V): weights stacked [3 x
  // 64, 40], output [3, 2, 5, 64] (CUDA's groups are multiples of 64 columns).
  Attrs grouped = gemm_attrs(true, false, "none");
  grouped.set("groups", int64_t{3});
  cases.push_back(simple_case("gemm_groups3_bias", OpKind::kGemm, grouped,
                              {act_input("x", Shape{2, 5, 40}),
                               param("w", Shape{192, 40}, Layout::kRowMajor, fan_in_scale(40)), param("b", Shape{192})}));
  cases.push_back(
      simple_case("gemm_relu_wide", OpKind::kGemm, gemm_attrs(true, false, "relu"),
                  {act_input("x", Shape{3, 200}), param("w", Shape{130, 200}, Layout::kRowMajor, fan_in_scale(200)),
                   param("b", Shape{130})}));
  // Batch-1 classifier shapes, which the CUDA GEMV path serves: rows of A up to 8, K a multiple
  // of 8 but not of the GEMV's K chunk, a residual; and one row over a longer K.
  cases.push_back(
      simple_case("gemm_rows6_bias_residual_relu", OpKind::kGemm, gemm_attrs(true, true, "relu"),
                  {act_input("x", Shape{2, 3, 264}), param("w", Shape{70, 264}, Layout::kRowMajor, fan_in_scale(264)),
                   param("b", Shape{70}), act_input("residual", Shape{2, 3, 70})}));
  cases.push_back(
      simple_case("gemm_row1_long_k", OpKind::kGemm, gemm_attrs(true, false, "none"),
                  {act_input("x", Shape{1, 2056}), param("w", Shape{33, 2056}, Layout::kRowMajor, fan_in_scale(2056)),
                   param("b", Shape{33})}));
  // Three rows over three of the GEMV's K chunks (the last a tail), and more columns than a full
  // grid's blocks cover, so its blocks loop.
  cases.push_back(
      simple_case("gemm_rows3_chunks", OpKind::kGemm, gemm_attrs(true, false, "none"),
                  {act_input("x", Shape{3, 4104}), param("w", Shape{20, 4104}, Layout::kRowMajor, fan_in_scale(4104)),
                   param("b", Shape{20})}));
  cases.push_back(
      simple_case("gemm_rows2_wide_n", OpKind::kGemm, gemm_attrs(true, false, "none"),
                  {act_input("x", Shape{2, 16}), param("w", Shape{17000, 16}, Layout::kRowMajor, fan_in_scale(16)),
                   param("b", Shape{17000})}));
  cases.push_back(simple_case("matmul_batched", OpKind::kMatMul, {},
                              {act_input("a", Shape{2, 3, 7, 9}), act_input("b", Shape{2, 3, 9, 5})}));
  cases.push_back(simple_case("matmul_trans_b_alpha", OpKind::kMatMul, {{"trans_b", int64_t{1}}, {"alpha", 0.125}},
                              {act_input("q", Shape{2, 4, 6, 8}), act_input("k", Shape{2, 4, 10, 8})}));
  cases.push_back(
      simple_case("matmul_2d_weight", OpKind::kMatMul, {}, {act_input("a", Shape{6, 12}), param("b", Shape{12, 4})}));
  // Attention on operands stored [batch, seq, heads, head_dim] (fold_head_transposes): scores
  // Q K^T, then the context P V written back seq-first; 2 x 3 heads of 8 (16-byte rows).
  cases.push_back(simple_case("matmul_heads_scores", OpKind::kMatMul,
                              {{"trans_b", int64_t{1}}, {"alpha", 0.125}, {"a_swap12", int64_t{1}},
                               {"b_swap12", int64_t{1}}},
                              {act_input("q", Shape{2, 10, 3, 8}), act_input("k", Shape{2, 12, 3, 8})}));
  cases.push_back(simple_case("matmul_heads_context", OpKind::kMatMul, {{"b_swap12", int64_t{1}}, {"y_swap12", int64_t{1}}},
                              {act_input("p", Shape{2, 3, 10, 12}), act_input("v", Shape{2, 12, 3, 16})}));
  cases.push_back(simple_case("matmul_heads_odd_rows", OpKind::kMatMul, {{"a_swap12", int64_t{1}}, {"y_swap12", int64_t{1}}},
                              {act_input("a", Shape{1, 5, 2, 7}), act_input("b", Shape{1, 2, 7, 3})}));
  // Fused attention (compiler-inserted): heads stored seq-first as BERT's; queries past one
  // 64-row tile and keys not a multiple of 16; many keys with a wide head, the context stored
  // seq-first alone.
  const Attrs all_swapped{{"scale", 0.25},
                          {"q_swap12", int64_t{1}},
                          {"k_swap12", int64_t{1}},
                          {"v_swap12", int64_t{1}},
                          {"y_swap12", int64_t{1}}};
  cases.push_back(simple_case("attention_heads", OpKind::kAttention, all_swapped,
                              {act_input("q", Shape{2, 10, 3, 16}), act_input("k", Shape{2, 12, 3, 16}),
                               act_input("v", Shape{2, 12, 3, 16})}));
  cases.push_back(simple_case("attention_plain_odd", OpKind::kAttention, {{"scale", 0.17}},
                              {act_input("q", Shape{1, 2, 70, 32}), act_input("k", Shape{1, 2, 33, 32}),
                               act_input("v", Shape{1, 2, 33, 32})}));
  cases.push_back(simple_case("attention_many_keys", OpKind::kAttention,
                              {{"scale", 0.125}, {"k_swap12", int64_t{1}}, {"v_swap12", int64_t{1}}, {"y_swap12", int64_t{1}}},
                              {act_input("q", Shape{1, 2, 5, 64}), act_input("k", Shape{1, 200, 2, 64}),
                               act_input("v", Shape{1, 200, 2, 64})}));
  // Heads wider than 64 (the 128-wide kernel) with a narrower value head; heads whose rows are
  // not whole 16-byte units (element loads and stores).
  cases.push_back(simple_case("attention_wide_heads", OpKind::kAttention, {{"scale", 0.1}},
                              {act_input("q", Shape{1, 2, 40, 96}), act_input("k", Shape{1, 2, 130, 96}),
                               act_input("v", Shape{1, 2, 130, 72})}));
  cases.push_back(simple_case("attention_unaligned", OpKind::kAttention, {{"scale", 0.3}},
                              {act_input("q", Shape{1, 2, 9, 20}), act_input("k", Shape{1, 2, 70, 20}),
                               act_input("v", Shape{1, 2, 70, 12})}));
  // More query tiles than blocks resident at once (about 660 of 16 rows on an H200), so the grid
  // runs in several waves: keys in two chunks, then in one.
  cases.push_back(simple_case("attention_items_per_block", OpKind::kAttention, {{"scale", 0.2}},
                              {act_input("q", Shape{3, 500, 9, 8}), act_input("k", Shape{3, 500, 70, 8}),
                               act_input("v", Shape{3, 500, 70, 8})}));
  cases.push_back(simple_case("attention_items_one_chunk", OpKind::kAttention, {{"scale", 0.3}},
                              {act_input("q", Shape{2, 700, 5, 16}), act_input("k", Shape{2, 700, 40, 16}),
                               act_input("v", Shape{2, 700, 40, 16})}));
  cases.push_back(simple_case("softmax_last_axis", OpKind::kSoftmax, {{"axis", int64_t{-1}}},
                              {act_input("x", Shape{3, 4, 37}, Layout::kRowMajor, 10.0f)}));
  cases.push_back(simple_case("softmax_axis1", OpKind::kSoftmax, {{"axis", int64_t{1}}},
                              {act_input("x", Shape{2, 5, 3, 4}, Layout::kRowMajor, 4.0f)}));
  cases.push_back(simple_case("softmax_channels_nhwc", OpKind::kSoftmax, {{"axis", int64_t{1}}},
                              {act_input("x", Shape{2, 5, 3, 4}, Layout::kNHWC, 4.0f)}, Layout::kNHWC));
  cases.push_back(simple_case(
      "layernorm", OpKind::kLayerNorm, {{"epsilon", 1e-5}},
      {act_input("x", Shape{2, 5, 48}, Layout::kRowMajor, 3.0f), param("gamma", Shape{48}), param("beta", Shape{48})}));
  cases.push_back(simple_case("layernorm_bert_eps", OpKind::kLayerNorm, {{"epsilon", 1e-12}},
                              {act_input("x", Shape{7, 33}), param("gamma", Shape{33}), param("beta", Shape{33})}));
}

// Ops that imported ONNX models bring beyond the zoo's. Divisors and the bases of Pow stay off
// zero, so that no quotient or power overflows f16 (the GPU suite runs these cases too).
void add_imported_op_cases(std::vector<OpCase>& cases) {
  const Shape s{3, 17, 5};
  Operand positive = act_input("x", s, Layout::kRowMajor, 4.0f);
  positive.positive = true;
  Operand divisor = act_input("b", Shape{17, 1});
  divisor.positive = true;
  divisor.offset = 0.5f;
  cases.push_back(simple_case("sub_broadcast", OpKind::kSub, {},
                              {act_input("a", Shape{2, 3, 4, 5}), act_input("b", Shape{3, 1, 5})}));
  cases.push_back(simple_case("sub_from_weight", OpKind::kSub, {}, {param("one", Shape{1}), act_input("m", s)}));
  cases.push_back(simple_case("div_broadcast", OpKind::kDiv, {}, {act_input("a", s), divisor}));
  Operand nhwc_divisor = act_input("b", Shape{2, 6, 5, 3}, Layout::kNHWC);
  nhwc_divisor.offset = 2.0f;  // in [1, 3)
  cases.push_back(simple_case("div_nhwc", OpKind::kDiv, {},
                              {act_input("a", Shape{2, 6, 5, 3}, Layout::kNHWC), nhwc_divisor}, Layout::kNHWC));
  Operand base = positive;
  base.name = "base";
  base.offset = 0.25f;
  cases.push_back(simple_case("pow_broadcast", OpKind::kPow, {}, {base, act_input("exp", Shape{5}, Layout::kRowMajor, 2.0f)}));
  cases.push_back(simple_case("sigmoid", OpKind::kSigmoid, {}, {act_input("x", s, Layout::kRowMajor, 6.0f)}));
  cases.push_back(simple_case("hard_sigmoid", OpKind::kHardSigmoid, {{"alpha", 0.3}, {"beta", 0.4}},
                              {act_input("x", s, Layout::kRowMajor, 4.0f)}));
  cases.push_back(simple_case("hard_swish_nhwc", OpKind::kHardSwish, {},
                              {act_input("x", Shape{2, 6, 5, 3}, Layout::kNHWC, 5.0f)}, Layout::kNHWC));
  cases.push_back(simple_case("erf", OpKind::kErf, {}, {act_input("x", s, Layout::kRowMajor, 3.0f)}));
  cases.push_back(simple_case("sqrt", OpKind::kSqrt, {}, {positive}));
  cases.push_back(simple_case("clip", OpKind::kClip, {{"min", -0.5}, {"max", 1.5}},
                              {act_input("x", s, Layout::kRowMajor, 3.0f)}));
  cases.push_back(simple_case("clip_min_only", OpKind::kClip, {{"min", 0.25}}, {act_input("x", s)}));
  cases.push_back(simple_case("reduce_mean_last_keepdims", OpKind::kReduceMean,
                              {{"axes", Ints{2}}, {"keepdims", int64_t{1}}}, {act_input("x", s)}));
  cases.push_back(simple_case("reduce_mean_middle_axis", OpKind::kReduceMean,
                              {{"axes", Ints{1}}, {"keepdims", int64_t{1}}}, {act_input("x", s)}));
  cases.push_back(simple_case("reduce_mean_middle_axes", OpKind::kReduceMean,
                              {{"axes", Ints{1, 2}}, {"keepdims", int64_t{0}}}, {act_input("x", Shape{4, 6, 3, 5})}));
  cases.push_back(simple_case("reduce_mean_unit_axis", OpKind::kReduceMean,
                              {{"axes", Ints{1, 3}}, {"keepdims", int64_t{1}}}, {act_input("x", Shape{3, 1, 4, 5})}));
  cases.push_back(simple_case("reduce_mean_outer_axes", OpKind::kReduceMean,
                              {{"axes", Ints{0, 2}}, {"keepdims", int64_t{0}}}, {act_input("x", Shape{4, 6, 3, 5})}));
  cases.push_back(simple_case("cast_i64_to_f32", OpKind::kCast, {{"to", std::string("f32")}},
                              {index_input("mask", Shape{2, 9}, 1000)}));
}

}  // namespace

OpCaseData OpCase::build(DType act_dtype, uint64_t seed) const {
  OpCaseData d;
  Program& p = d.program;
  p.model = name;
  p.act_dtype = act_dtype;
  p.alignment = 64;
  Graph g(name);
  Kernel k;
  k.name = name;
  k.op = op;
  k.attrs = attrs;
  std::vector<ValueId> ids;
  for (const Operand& o : operands) {
    const bool activation = o.role == Operand::Role::kInput;
    Tensor logical = random_tensor(o, seed, activation && act_dtype == DType::kF16 && o.dtype == DType::kF32);
    ids.push_back(g.add_input(o.name, o.dtype, o.shape));
    TensorSpec spec{o.name, activation && is_float(o.dtype) ? act_dtype : o.dtype, o.shape, o.layout};
    Binding b;
    b.dtype = spec.dtype;
    b.shape = o.shape;
    b.layout = o.layout;
    b.bytes = o.shape.numel() * static_cast<int64_t>(dtype_size(spec.dtype));
    if (activation) {
      b.kind = Binding::Kind::kInput;
      b.index = static_cast<int>(p.inputs.size());
      p.inputs.push_back(spec);
      d.inputs.push_back(logical);
    } else {
      b.kind = Binding::Kind::kWeight;
      b.index = static_cast<int>(p.weights.size());
      p.weights.push_back(spec);
      d.weights[o.name] = to_storage(logical, o.layout);
    }
    k.inputs.push_back(b);
    d.operands.push_back(std::move(logical));
  }
  // The IR's shape inference, not the backend's, decides the output shape.
  const Shape out = g.value(g.add(op, name, ids, attrs)).shape;
  p.batch = out.rank() > 0 ? out[0] : 1;
  p.outputs.push_back(TensorSpec{"output", act_dtype, out, out_layout});
  Binding ob;
  ob.kind = Binding::Kind::kOutput;
  ob.index = 0;
  ob.dtype = act_dtype;
  ob.shape = out;
  ob.layout = out_layout;
  ob.bytes = out.numel() * static_cast<int64_t>(dtype_size(act_dtype));
  k.outputs.push_back(ob);
  p.kernels.push_back(std::move(k));
  p.fingerprint = p.compute_fingerprint();
  verify_program(p);
  return d;
}

std::vector<Tensor> OpCase::reference(const OpCaseData& data) const {
  return {reference_op(op, attrs, data.operands, data.program.outputs[0].shape)};
}

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> cases;
  add_conv_cases(cases);
  add_pool_cases(cases);
  add_elementwise_cases(cases);
  add_data_cases(cases);
  add_gemm_norm_cases(cases);
  add_imported_op_cases(cases);
  return cases;
}

OpCase find_op_case(const std::string& name) {
  for (OpCase& c : all_op_cases()) {
    if (c.name == name) return c;
  }
  ATOLL_THROW(kNotFound, "no op case '{}'", name);
}

}  // namespace atl::opcases
