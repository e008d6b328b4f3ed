// Every op case (the shared list plus GPU shapes that take the vectorized, tiled and split-K
// paths) on the CUDA backend, against the naive double reference and against the CPU backend on
// the same f16-rounded inputs. Outputs start poisoned; fresh inputs every run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>

#include "../backends/op_cases.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/kernel_params.h"
#include "core/error.h"
#include "gpu_test_util.h"
#include "ir/op_attrs.h"

namespace atl {
namespace opcases {
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }
}  // namespace opcases

namespace {

using opcases::OpCase;
using opcases::OpCaseData;
using opcases::Operand;
using opcases::act_input;
using opcases::param;
using Ints = std::vector<int64_t>;

// Tolerances on max_rel_error (per element, floored at the output's RMS). f16 has a unit
// roundoff of 2^-11 = 4.9e-4: a copy rounds once; arithmetic ops round inputs and the output;
// matrix ops also round the weights to f16 and accumulate long sums in f32; softmax uses __expf.
double tolerance(OpKind op) {
  if (is_unary_elementwise(op) || is_binary_elementwise(op)) return 2e-3;
  switch (op) {
    case OpKind::kTranspose:
    case OpKind::kLayoutToNHWC:
    case OpKind::kLayoutToNCHW:
    case OpKind::kSlice:
    case OpKind::kConcat:
    case OpKind::kGather:
    case OpKind::kMaxPool: return 1e-3;
    case OpKind::kCast: return 1e-3;  // integers below 2048 are exact in f16
    case OpKind::kScaleShift:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
    case OpKind::kReduceMean: return 2e-3;
    default: return 1e-2;
  }
}


OpCase make_case(std::string name, OpKind op, Attrs attrs, std::vector<Operand> operands,
                 Layout out_layout = Layout::kRowMajor) {
  OpCase c;
  c.name = "gpu_" + std::move(name);
  c.op = op;
  c.attrs = std::move(attrs);
  c.operands = std::move(operands);
  c.out_layout = out_layout;
  return c;
}

float fan_in(int64_t n) { return std::sqrt(3.0f / static_cast<float>(n)); }

OpCase conv(std::string name, Shape x, int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t group, bool bias,
            bool residual, const char* act_name) {
  const int64_t cg = x[1] / group;
  std::vector<Operand> ops{act_input("x", x, Layout::kNHWC), param("w", Shape{o, cg, k, k}, Layout::kNHWC, fan_in(cg * k * k))};
  if (bias) ops.push_back(param("b", Shape{o}, Layout::kRowMajor, 0.5f));
  if (residual) {
    const int64_t oh = pool_out_size(x[2], k, stride, pad, pad, 1, false);
    const int64_t ow = pool_out_size(x[3], k, stride, pad, pad, 1, false);
    ops.push_back(act_input("r", Shape{x[0], o, oh, ow}, Layout::kNHWC));
  }
  Attrs a{{"stride", Ints{stride, stride}}, {"pads", Ints{pad, pad, pad, pad}}, {"dilation", Ints{1, 1}},
          {"group", group}, {"bias", int64_t{bias}}, {"residual", int64_t{residual}}, {"act", std::string(act_name)}};
  return make_case("conv_" + name, OpKind::kConv2d, a, ops, Layout::kNHWC);
}

Operand off_zero(Operand o, float offset) {
  o.positive = true;
  o.offset = offset;
  return o;
}

// The imported models' ops on shapes that take the 16-byte paths: element counts and innermost
// extents that are multiples of 8 (the shared cases take the scalar paths).
void add_imported_op_gpu_cases(std::vector<OpCase>& c) {
  const Shape s{2, 48, 40};
  const std::pair<const char*, OpKind> plain[] = {
      {"sigmoid_vec", OpKind::kSigmoid}, {"hard_swish_vec", OpKind::kHardSwish}, {"erf_vec", OpKind::kErf}};
  for (const auto& [name, op] : plain) c.push_back(make_case(name, op, {}, {act_input("x", s, Layout::kRowMajor, 5.0f)}));
  c.push_back(make_case("hard_sigmoid_vec", OpKind::kHardSigmoid, {{"alpha", 0.2}, {"beta", 0.5}},
                        {act_input("x", s, Layout::kRowMajor, 4.0f)}));
  c.push_back(make_case("sqrt_vec", OpKind::kSqrt, {}, {off_zero(act_input("x", s, Layout::kRowMajor, 4.0f), 0.0f)}));
  c.push_back(make_case("clip_vec", OpKind::kClip, {{"min", 0.0}, {"max", 6.0}},
                        {act_input("x", s, Layout::kRowMajor, 8.0f)}));
  c.push_back(make_case("hard_swish_nhwc_vec", OpKind::kHardSwish, {},
                        {act_input("x", Shape{2, 16, 7, 7}, Layout::kNHWC, 5.0f)}, Layout::kNHWC));
  // Same shapes (the same-shape vector path), NHWC included.
  c.push_back(make_case("sub_vec", OpKind::kSub, {}, {act_input("a", s), act_input("b", s)}));
  c.push_back(make_case("div_nhwc_vec", OpKind::kDiv, {},
                        {act_input("a", Shape{2, 8, 5, 5}, Layout::kNHWC),
                         off_zero(act_input("b", Shape{2, 8, 5, 5}, Layout::kNHWC), 0.5f)},
                        Layout::kNHWC));
  // Broadcasts along the innermost axis (a column repeated: stride 0) and across rows (a row
  // vector: stride 1), the broadcast vector path; then one the scalar path takes.
  c.push_back(make_case("div_bcast_vec_column", OpKind::kDiv, {},
                        {act_input("a", Shape{4, 32, 64}), off_zero(act_input("b", Shape{4, 32, 1}), 0.5f)}));
  c.push_back(make_case("sub_bcast_vec_row", OpKind::kSub, {},
                        {act_input("a", Shape{16, 64}), act_input("b", Shape{64})}));
  c.push_back(make_case("pow_bcast_vec_scalar_exponent", OpKind::kPow, {},
                        {off_zero(act_input("x", Shape{8, 64}, Layout::kRowMajor, 3.0f), 0.25f),
                         param("e", Shape{1}, Layout::kRowMajor, 2.0f)}));
  c.push_back(make_case("pow_bcast_scalar_path", OpKind::kPow, {},
                        {off_zero(act_input("x", Shape{6, 1, 12}, Layout::kRowMajor, 3.0f), 0.25f),
                         act_input("e", Shape{5, 1}, Layout::kRowMajor, 2.0f)}));
  // ReduceMean: the innermost axis reduced (one warp per output), kept (one thread per 8
  // outputs), several axes in two runs, and a reduction of an image's plane (scalar path).
  const Ints last{2}, middle{1};
  c.push_back(make_case("reduce_mean_rows_vec", OpKind::kReduceMean, {{"axes", last}, {"keepdims", int64_t{1}}},
                        {act_input("x", Shape{3, 33, 768})}));
  c.push_back(make_case("reduce_mean_middle_vec", OpKind::kReduceMean, {{"axes", middle}, {"keepdims", int64_t{0}}},
                        {act_input("x", Shape{4, 10, 64})}));
  c.push_back(make_case("reduce_mean_two_runs_vec", OpKind::kReduceMean,
                        {{"axes", Ints{1, 3}}, {"keepdims", int64_t{0}}}, {act_input("x", Shape{2, 3, 8, 16})}));
  c.push_back(make_case("reduce_mean_kept_runs_vec", OpKind::kReduceMean,
                        {{"axes", Ints{0, 2}}, {"keepdims", int64_t{1}}}, {act_input("x", Shape{3, 5, 6, 24})}));
  c.push_back(make_case("reduce_mean_plane", OpKind::kReduceMean, {{"axes", Ints{2, 3}}, {"keepdims", int64_t{1}}},
                        {act_input("x", Shape{2, 64, 7, 7})}));
  Operand ids = act_input("ids", Shape{4, 64});
  ids.dtype = DType::kI64;
  ids.index_limit = 2048;
  c.push_back(make_case("cast_i64_to_f32_vec", OpKind::kCast, {{"to", std::string("f32")}}, {ids}));
}

// Shapes whose channels, K and strides are multiples of 8 (the 16-byte paths), big enough for
// several tiles, plus batch-1 shapes the planner splits along K.
std::vector<OpCase> gpu_op_cases() {
  std::vector<OpCase> c;
  c.push_back(conv("3x3_c64_o96_bias_relu", Shape{1, 64, 14, 14}, 96, 3, 1, 1, 1, true, false, "relu"));
  c.push_back(conv("1x1_c256_o512_7x7_residual", Shape{1, 256, 7, 7}, 512, 1, 1, 0, 1, true, true, "relu"));
  c.push_back(conv("1x1_c64_o256_28x28_batch2", Shape{2, 64, 28, 28}, 256, 1, 1, 0, 1, true, false, "relu"));
  c.push_back(conv("3x3_s2_c32_o64_odd_map", Shape{2, 32, 17, 15}, 64, 3, 2, 1, 1, true, false, "none"));
  c.push_back(conv("3x3_group4_c64", Shape{1, 64, 9, 9}, 64, 3, 1, 1, 4, false, false, "relu"));
  c.push_back(conv("3x3_c256_7x7_split_k", Shape{1, 256, 7, 7}, 256, 3, 1, 1, 1, true, false, "relu"));
  // The TMA tiles' im2col walk (channels a multiple of 64): 128-pixel tiles that straddle rows and
  // images (M = 3 x 11 x 13), stride 2 over an odd map, a strided 1x1 and a 5x5 with pad 2.
  c.push_back(conv("3x3_c64_o128_batch3_im2col", Shape{3, 64, 11, 13}, 128, 3, 1, 1, 1, true, true, "relu"));
  c.push_back(conv("3x3_s2_c128_o64_odd_im2col", Shape{2, 128, 15, 13}, 64, 3, 2, 1, 1, true, false, "none"));
  c.push_back(conv("1x1_s2_c64_o128_im2col", Shape{2, 64, 14, 15}, 128, 1, 2, 0, 1, false, false, "relu"));
  c.push_back(conv("5x5_c64_o64_pad2_im2col", Shape{1, 64, 12, 10}, 64, 5, 1, 2, 1, true, false, "none"));
  // K = 360: a multiple of 8 but not of the wgmma kernel's 64-wide K tile; N = 72 leaves a tail.
  c.push_back(conv("3x3_c40_o72_k_tail", Shape{2, 40, 30, 30}, 72, 3, 1, 1, 1, true, true, "relu"));
  c.push_back(conv("stem_7x7_c3_o64", Shape{1, 3, 57, 57}, 64, 7, 2, 3, 1, true, false, "relu"));
  c.push_back(conv("stem_3x3_c3_o32_residual", Shape{2, 3, 19, 23}, 32, 3, 1, 1, 1, false, true, "relu6"));
  c.push_back(conv("stem_3x3_c4_o24_s2", Shape{1, 4, 16, 15}, 24, 3, 2, 1, 1, true, false, "none"));
  // One channel (grayscale), and a 1x1 stem whose padded input is a plain [M, 8] operand.
  c.push_back(conv("stem_5x5_c1_o16_s2", Shape{2, 1, 21, 18}, 16, 5, 2, 2, 1, true, false, "relu"));
  c.push_back(conv("stem_1x1_c3_o32", Shape{1, 3, 24, 24}, 32, 1, 1, 0, 1, true, false, "none"));
  c.push_back(conv("depthwise_c32_s1", Shape{2, 32, 13, 11}, 32, 3, 1, 1, 32, true, false, "relu6"));
  c.push_back(conv("depthwise_c64_s2_residual", Shape{1, 64, 14, 14}, 64, 3, 2, 1, 64, true, true, "none"));
  // The depthwise kernel unrolls 3x3 filters; other sizes and channels not a multiple of 8 take
  // the general loops.
  c.push_back(conv("depthwise_5x5_c48_s2", Shape{2, 48, 17, 15}, 48, 5, 2, 2, 48, true, false, "relu"));
  c.push_back(conv("depthwise_c12_scalar_residual", Shape{1, 12, 9, 10}, 12, 3, 1, 1, 12, false, true, "none"));
  c.push_back(make_case("maxpool_c64", OpKind::kMaxPool,
                        {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
                        {act_input("x", Shape{2, 64, 15, 15}, Layout::kNHWC)}, Layout::kNHWC));
  c.push_back(make_case("avgpool_c32_exclude_pad", OpKind::kAvgPool,
                        {{"kernel", Ints{3, 3}}, {"stride", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}},
                         {"count_include_pad", int64_t{0}}},
                        {act_input("x", Shape{1, 32, 9, 8}, Layout::kNHWC)}, Layout::kNHWC));
  c.push_back(make_case("global_avgpool_c2048", OpKind::kGlobalAvgPool, {},
                        {act_input("x", Shape{2, 2048, 7, 7}, Layout::kNHWC)}, Layout::kNHWC));
  const Attrs gemm_bias_gelu{{"bias", int64_t{1}}, {"residual", int64_t{0}}, {"act", std::string("gelu")}};
  c.push_back(make_case("gemm_300x260x512_gelu", OpKind::kGemm, gemm_bias_gelu,
                        {act_input("x", Shape{3, 100, 512}), param("w", Shape{260, 512}, Layout::kRowMajor, fan_in(512)),
                         param("b", Shape{260})}));
  // Enough tiles (M = 69,000) that every wgmma tile and the 64x64 mma.sync tile take the
  // persistent grid, whose blocks walk several tiles each.
  c.push_back(make_case("gemm_tall_persistent", OpKind::kGemm,
                        {{"bias", int64_t{1}}, {"residual", int64_t{0}}, {"act", std::string("relu")}},
                        {act_input("x", Shape{69000, 64}), param("w", Shape{128, 64}, Layout::kRowMajor, fan_in(64)),
                         param("b", Shape{128})}));
  // Q, K and V as one grouped Gemm: every tile whose N divides the segment, and every split,
  // writes each segment where its slice starts. Segments of 192 columns take only the 64-wide
  // tiles; of 256 (with a row tail), every tile.
  Attrs groups3{{"bias", int64_t{1}}, {"residual", int64_t{0}}, {"act", std::string("none")}, {"groups", int64_t{3}}};
  c.push_back(make_case("gemm_groups3_256x192x128", OpKind::kGemm, groups3,
                        {act_input("x", Shape{2, 128, 128}), param("w", Shape{576, 128}, Layout::kRowMajor, fan_in(128)), param("b", Shape{576})}));
  Attrs groups2 = groups3;
  groups2.set("groups", int64_t{2});
  c.push_back(make_case("gemm_groups2_300x256x96", OpKind::kGemm, groups2,
                        {act_input("x", Shape{300, 96}), param("w", Shape{512, 96}, Layout::kRowMajor, fan_in(96)), param("b", Shape{512})}));
  // BERT-base's FFN at batch 8 (every TMA tile, full tiles), then K and N tails of the 64-wide K
  // tile and of the 256-wide N tile, with a residual.
  c.push_back(make_case("gemm_1024x3072x768_gelu", OpKind::kGemm, gemm_bias_gelu,
                        {act_input("x", Shape{1024, 768}), param("w", Shape{3072, 768}, Layout::kRowMajor, fan_in(768)),
                         param("b", Shape{3072})}));
  c.push_back(make_case("gemm_k200_n300_residual", OpKind::kGemm,
                        {{"bias", int64_t{1}}, {"residual", int64_t{1}}, {"act", std::string("relu")}},
                        {act_input("x", Shape{333, 200}), param("w", Shape{300, 200}, Layout::kRowMajor, fan_in(200)),
                         param("b", Shape{300}), act_input("r", Shape{333, 300})}));
  c.push_back(make_case("gemm_classifier_m1", OpKind::kGemm,
                        {{"bias", int64_t{1}}, {"residual", int64_t{0}}, {"act", std::string("none")}},
                        {act_input("x", Shape{1, 2048}), param("w", Shape{1000, 2048}, Layout::kRowMajor, fan_in(2048)),
                         param("b", Shape{1000})}));
  c.push_back(make_case("gemm_residual_768", OpKind::kGemm,
                        {{"bias", int64_t{1}}, {"residual", int64_t{1}}, {"act", std::string("none")}},
                        {act_input("x", Shape{1, 128, 768}), param("w", Shape{768, 768}, Layout::kRowMajor, fan_in(768)),
                         param("b", Shape{768}), act_input("r", Shape{1, 128, 768})}));
  c.push_back(make_case("matmul_trans_b_heads", OpKind::kMatMul, {{"trans_b", int64_t{1}}, {"alpha", 0.125}},
                        {act_input("q", Shape{2, 3, 64, 40}), act_input("k", Shape{2, 3, 72, 40})}));
  c.push_back(make_case("matmul_kn_heads", OpKind::kMatMul, {},
                        {act_input("p", Shape{2, 3, 64, 72}), act_input("v", Shape{2, 3, 72, 48})}));
  c.push_back(make_case("relu_vec", OpKind::kRelu, {}, {act_input("x", Shape{4, 64, 33})}));
  c.push_back(make_case("add_vec_relu", OpKind::kAdd, {{"act", std::string("relu")}},
                        {act_input("a", Shape{2, 64, 40}), act_input("b", Shape{2, 64, 40})}));
  c.push_back(make_case("scale_shift_nhwc_vec", OpKind::kScaleShift, {{"act", std::string("relu")}},
                        {act_input("x", Shape{2, 64, 7, 7}, Layout::kNHWC), param("s", Shape{64}), param("t", Shape{64})},
                        Layout::kNHWC));
  c.push_back(make_case("concat_channels_vec", OpKind::kConcat, {{"axis", int64_t{1}}},
                        {act_input("a", Shape{1, 32, 7, 7}, Layout::kNHWC), act_input("b", Shape{1, 64, 7, 7}, Layout::kNHWC),
                         act_input("c", Shape{1, 16, 7, 7}, Layout::kNHWC)},
                        Layout::kNHWC));
  std::vector<Operand> many;
  for (int i = 0; i < 50; ++i) many.push_back(act_input(fmt::format("p{}", i), Shape{1, 8, 3, 3}, Layout::kNHWC));
  c.push_back(make_case("concat_50_parts", OpKind::kConcat, {{"axis", int64_t{1}}}, many, Layout::kNHWC));
  c.push_back(make_case("transpose_heads_vec", OpKind::kTranspose, {{"perm", Ints{0, 2, 1, 3}}},
                        {act_input("x", Shape{2, 16, 4, 64})}));
  c.push_back(make_case("slice_first_token_vec", OpKind::kSlice,
                        {{"axes", Ints{1}}, {"starts", Ints{0}}, {"ends", Ints{1}}}, {act_input("x", Shape{2, 9, 64})}));
  c.push_back(make_case("softmax_rows_128", OpKind::kSoftmax, {{"axis", int64_t{-1}}},
                        {act_input("x", Shape{2, 12, 128}, Layout::kRowMajor, 8.0f)}));
  c.push_back(make_case("layernorm_768", OpKind::kLayerNorm, {{"epsilon", 1e-12}},
                        {act_input("x", Shape{20, 768}, Layout::kRowMajor, 3.0f), param("g", Shape{768}),
                         param("b", Shape{768})}));
  // Rows held in registers: part of a lane's chunks (520 = 2 x 256 + 8; 1032 rounds up to 6
  // chunks), and rows too long for them (4104), which take the re-reading kernels.
  for (int64_t len : {520, 1032, 4104}) {
    const std::string n = std::to_string(len);
    c.push_back(make_case("softmax_rows_" + n, OpKind::kSoftmax, {{"axis", int64_t{-1}}},
                          {act_input("x", Shape{3, 5, len}, Layout::kRowMajor, 8.0f)}));
    c.push_back(make_case("layernorm_" + n, OpKind::kLayerNorm, {{"epsilon", 1e-5}},
                          {act_input("x", Shape{9, len}, Layout::kRowMajor, 3.0f), param("g", Shape{len}),
                           param("b", Shape{len})}));
  }
  Operand ids = act_input("ids", Shape{3, 5});
  ids.dtype = DType::kI64;
  ids.index_limit = 40;
  c.push_back(make_case("gather_d64", OpKind::kGather, {}, {param("table", Shape{40, 64}), ids}));
  add_imported_op_gpu_cases(c);
  return c;
}

Tensor run_cpu(const OpCase& c, uint64_t seed, const std::vector<Tensor>& inputs) {
  const OpCaseData d32 = c.build(DType::kF32, seed);
  auto inst = make_cpu_backend()->load(d32.program, d32.weights);
  for (size_t i = 0; i < inputs.size(); ++i) inst->set_input(static_cast<int>(i), inputs[i]);
  inst->run();
  return inst->get_output(0);
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> c = opcases::all_op_cases();
  for (OpCase& g : gpu_op_cases()) c.push_back(std::move(g));
  return c;
}

// Needs no GPU: every imported-op case (shared and GPU-only) is accepted by the CUDA registry,
// and the CPU backend matches the reference on it, so the GPU comparison checks the kernels.
TEST(GpuOps, ImportedOpCasesPrepareOnCudaAndMatchOnCpu) {
  int checked = 0;
  for (const OpCase& c : all_cases()) {
    if (!gputest::is_imported_op(c.op)) continue;
    SCOPED_TRACE(c.name);
    const OpCaseData data = c.build(DType::kF16, 1);
    const gputest::PrepareOnlyContext ctx(data.program);
    EXPECT_NO_THROW(cuda::prepare_launch(data.program.kernels[0], ctx));
    const Tensor cpu = run_cpu(c, 1, data.inputs);
    EXPECT_LE(opcases::max_rel_error(cpu, c.reference(data)[0]), 1e-5);
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

// An op the compiler removes or rewrites (BatchNorm folds into convolutions or becomes
// ScaleShift) has no CUDA kernel: a Program that still holds one is refused at load.
TEST(GpuOps, RefusesOpsWithoutKernelAtLoadNamingTheOp) {
  ATL_REQUIRE_GPU();
  const Shape c{4};
  const OpCase bn = make_case("batchnorm", OpKind::kBatchNorm, {{"epsilon", 1e-5}},
                              {act_input("x", Shape{2, 4, 3, 3}), param("g", c), param("b", c), param("m", c),
                               param("v", c)});
  const OpCaseData data = bn.build(DType::kF16, 1);
  try {
    make_cuda_backend()->load(data.program, data.weights);
    FAIL() << "loaded an op the CUDA backend has no kernel for";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find("BatchNorm"), std::string::npos) << e.message();
  }
}

// ReduceMean reads row-major tensors (the compiler casts NHWC inputs back first); anything else
// is refused when the launch is prepared, naming the kernel and the op. Needs no GPU.
TEST(GpuOps, RefusesReduceMeanOverNhwc) {
  const OpCase c = make_case("reduce_mean_nhwc", OpKind::kReduceMean, {{"axes", Ints{1}}, {"keepdims", int64_t{1}}},
                             {act_input("x", Shape{2, 8, 3, 3}, Layout::kNHWC)});
  const OpCaseData data = c.build(DType::kF16, 1);
  try {
    cuda::prepare_launch(data.program.kernels[0], gputest::PrepareOnlyContext(data.program));
    FAIL() << "prepared a ReduceMean over an NHWC input";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find("ReduceMean"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(c.name), std::string::npos) << e.message();
  }
}

class GpuOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(GpuOpTest, MatchesReferenceAndCpuBackend) {
  ATL_REQUIRE_GPU();
  const OpCase& c = GetParam();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << c.name << " seed " << seed);
  const OpCaseData data = c.build(DType::kF16, seed);
  auto inst = make_cuda_backend()->load(data.program, data.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
  const Tensor want = c.reference(data)[0];
  const Tensor cpu = run_cpu(c, seed, data.inputs);
  const double tol = tolerance(c.op);

  gpu.poison(0xFF);
  inst->run();
  const Tensor got = inst->get_output(0);
  EXPECT_LE(opcases::max_rel_error(got, want), tol) << "vs reference";
  EXPECT_LE(opcases::max_rel_error(got, cpu), tol) << "vs CPU backend";

  // Same inputs, run again from poison: bit-identical (idempotent, deterministic).
  gpu.poison(0xFF);
  inst->run();
  EXPECT_TRUE(gputest::same_bytes(inst->get_output(0), got)) << "second run differs";

  // Every tile / split-K alternative computes the same function.
  const int choices = gpu.gemm_choice_count(0);
  for (int i = 0; i < choices; ++i) {
    gpu.select_gemm_choice(0, i);
    gpu.poison(0xFF);
    inst->run();
    EXPECT_LE(opcases::max_rel_error(inst->get_output(0), want), tol) << "choice " << gpu.gemm_choice(0);
  }

  // The imported ops' kernels and the fused attention (the zoo's are checked per model in
  // test_gpu_preempt, without it unless asked) stop at entry while the flag is raised: the
  // poison survives.
  if (gputest::is_imported_op(c.op) || c.op == OpKind::kAttention) {
    gpu.poison(0xFF);
    gputest::set_flag(gpu.preempt_flag(), 1);
    gpu.launch(0, gpu.stream(), gpu.preempt_flag());
    EXPECT_TRUE(gputest::all_bytes_are(gpu.read_binding(data.program.kernels[0].outputs[0]), 0xFF))
        << "wrote while preempted";
    gputest::set_flag(gpu.preempt_flag(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, GpuOpTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

bool hopper_gemm_device() {
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && cuda::wgmma_gemm_built() && prop.major == 9 &&
         prop.minor == 0;
}

struct ChoiceCheck {
  int cases = 0;          // cases that offered a picked choice
  int cases_without = 0;  // cases that offered none
};

// Each of `cases` on a backend with `options`, and every GEMM choice of its first kernel that
// `pick` admits (by name): the output matches the reference, reruns bit-identically, and the
// kernel stops at entry while the flag is raised (the poison survives).
ChoiceCheck check_gemm_choices(const CudaBackendOptions& options, const std::vector<OpCase>& cases,
                               const std::function<bool(const std::string&)>& pick) {
  ChoiceCheck r;
  for (const OpCase& c : cases) {
    const uint64_t seed = gputest::fresh_seed();
    SCOPED_TRACE(::testing::Message() << c.name << " seed " << seed);
    const OpCaseData data = c.build(DType::kF16, seed);
    auto inst = make_cuda_backend(options)->load(data.program, data.weights);
    CudaInstance& gpu = gputest::as_cuda(*inst);
    std::vector<int> picked;
    for (int i = 0; i < gpu.gemm_choice_count(0); ++i) {
      gpu.select_gemm_choice(0, i);
      if (pick(gpu.gemm_choice(0))) picked.push_back(i);
    }
    if (picked.empty()) {
      ++r.cases_without;
      continue;
    }
    ++r.cases;
    for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
    const Tensor want = c.reference(data)[0];
    for (int i : picked) {
      gpu.select_gemm_choice(0, i);
      const std::string choice = gpu.gemm_choice(0);
      gpu.poison(0xFF);
      inst->run();
      const Tensor got = inst->get_output(0);
      EXPECT_LE(opcases::max_rel_error(got, want), tolerance(c.op)) << "choice " << choice;
      gpu.poison(0xFF);
      inst->run();
      EXPECT_TRUE(gputest::same_bytes(inst->get_output(0), got)) << "choice " << choice << " rerun differs";
      gpu.poison(0xFF);
      gputest::set_flag(gpu.preempt_flag(), 1);
      gpu.launch(0, gpu.stream(), gpu.preempt_flag());
      EXPECT_TRUE(gputest::all_bytes_are(gpu.read_binding(data.program.kernels[0].outputs[0]), 0xFF))
          << "choice " << choice << " wrote while preempted";
      gputest::set_flag(gpu.preempt_flag(), 0);
    }
  }
  return r;
}

// With CudaBackendOptions::tma_im2col, the TMA tiles are offered to convolutions of 64k
// channels and read A through the TMA's im2col walk: every such tile and split matches the
// reference (tile rows that straddle image rows and images, strides, 5x5 taps, split-K), and
// stops at entry while the flag is raised.
TEST(GpuOps, Im2colConvolutionsOnTheTmaTilesMatchTheReference) {
  ATL_REQUIRE_GPU();
  if (!hopper_gemm_device()) GTEST_SKIP() << "no sm_90 device or sm_90a build";
  CudaBackendOptions options;
  options.autotune = false;
  options.tma_im2col = true;
  options.pingpong = true;
  std::vector<OpCase> cases;
  for (OpCase& c : gpu_op_cases()) {
    if (c.name.find("im2col") != std::string::npos || c.name == "gpu_conv_3x3_c256_7x7_split_k") cases.push_back(c);
  }
  const ChoiceCheck r = check_gemm_choices(options, cases, [](const std::string& choice) {
    return choice.front() == 't' || choice.front() == 'p';
  });
  EXPECT_EQ(r.cases, 5);
  EXPECT_EQ(r.cases_without, 0) << "cases with no TMA tile offered";
}

// With CudaBackendOptions::pingpong, the ping-pong TMA tile joins the TMA tiles: on every GEMM,
// convolution and MatMul case that offers it (tile counts odd and even per block, split-K, im2col,
// grouped Gemms), each split matches the reference, reruns bit-identically, and stops at entry.
TEST(GpuOps, PingPongTilesMatchTheReference) {
  ATL_REQUIRE_GPU();
  if (!hopper_gemm_device()) GTEST_SKIP() << "no sm_90 device or sm_90a build";
  CudaBackendOptions options;
  options.autotune = false;
  options.pingpong = true;
  std::vector<OpCase> cases;
  for (OpCase& c : all_cases()) {
    if (c.op == OpKind::kGemm || c.op == OpKind::kConv2d || c.op == OpKind::kMatMul) cases.push_back(c);
  }
  const ChoiceCheck r =
      check_gemm_choices(options, cases, [](const std::string& choice) { return choice.front() == 'p'; });
  EXPECT_GE(r.cases, 8) << "op cases that offer the ping-pong tile";
}

// With CudaBackendOptions::cluster_tile, the cluster tile (two blocks sharing B by multicast): on
// every GEMM, convolution and MatMul case that offers it (a 256-row tile's second block wholly
// past M, N short of 256, split-K, im2col, grouped Gemms), each split matches the reference,
// reruns bit-identically, and stops at entry: both blocks halt at the first stage.
TEST(GpuOps, ClusterTilesMatchTheReference) {
  ATL_REQUIRE_GPU();
  if (!hopper_gemm_device()) GTEST_SKIP() << "no sm_90 device or sm_90a build";
  CudaBackendOptions options;
  options.autotune = false;
  options.cluster_tile = true;
  std::vector<OpCase> cases;
  for (OpCase& c : all_cases()) {
    if (c.op == OpKind::kGemm || c.op == OpKind::kConv2d || c.op == OpKind::kMatMul) cases.push_back(c);
  }
  const ChoiceCheck r =
      check_gemm_choices(options, cases, [](const std::string& choice) { return choice.front() == 'c'; });
  EXPECT_GE(r.cases, 8) << "op cases that offer the cluster tile";
}

// With CudaBackendOptions::gemv, the GEMV path: on every Gemm case it serves (batch-1 rows up to
// 8, K a multiple of 8, with and without a residual), it matches the reference, reruns
// bit-identically and stops at entry.
TEST(GpuOps, GemvPathMatchesTheReference) {
  ATL_REQUIRE_GPU();
  CudaBackendOptions options;
  options.gemv = true;
  std::vector<OpCase> cases;
  for (OpCase& c : all_cases()) {
    if (c.op == OpKind::kGemm || c.op == OpKind::kMatMul || c.op == OpKind::kConv2d) cases.push_back(c);
  }
  const ChoiceCheck r =
      check_gemm_choices(options, cases, [](const std::string& choice) { return choice == "gemv"; });
  EXPECT_GE(r.cases, 3) << "op cases that offer the GEMV path";
}

TEST(GpuOps, PoisonedOutputIsCaught) {
  ATL_REQUIRE_GPU();
  const OpCase c = all_cases().front();
  const OpCaseData data = c.build(DType::kF16, gputest::fresh_seed());
  auto inst = make_cuda_backend()->load(data.program, data.weights);
  gputest::as_cuda(*inst).poison(0xFF);
  // Not run: every output element is still NaN, which the comparison must reject.
  const Tensor unwritten = inst->get_output(0);
  for (float v : unwritten.as<float>()) ASSERT_TRUE(std::isnan(v));
  EXPECT_EQ(opcases::max_rel_error(unwritten, c.reference(data)[0]), INFINITY);
}

TEST(GpuOps, OutOfRangeGatherIndexIsReported) {
  ATL_REQUIRE_GPU();
  Operand ids = act_input("ids", Shape{2, 3});
  ids.dtype = DType::kI64;
  ids.index_limit = 10;
  const OpCase c = make_case("gather_bad_index", OpKind::kGather, {}, {param("table", Shape{10, 8}), ids});
  const OpCaseData data = c.build(DType::kF16, 1);
  auto inst = make_cuda_backend()->load(data.program, data.weights);
  Tensor bad = data.inputs[0].clone();
  bad.as<int64_t>()[4] = 10;
  inst->set_input(0, bad);
  try {
    inst->run();
    FAIL() << "an out-of-range index must be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
  }
  // Reported once; a valid run afterwards succeeds.
  inst->set_input(0, data.inputs[0]);
  EXPECT_NO_THROW(inst->run());
}

TEST(GpuOps, F32ProgramIsRejectedWithItsName) {
  ATL_REQUIRE_GPU();
  const OpCase c = opcases::all_op_cases().front();
  const OpCaseData data = c.build(DType::kF32, 1);
  try {
    make_cuda_backend()->load(data.program, data.weights);
    FAIL() << "an f32 program must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find(c.name), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace atl
