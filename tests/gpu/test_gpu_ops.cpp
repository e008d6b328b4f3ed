// Every op case (the shared list plus GPU shapes that take the vectorized, tiled and split-K
// paths) on the CUDA backend, against the naive double reference and against the CPU backend on
// the same f16-rounded inputs. Outputs start poisoned; fresh inputs every run.
#include <gtest/gtest.h>

#include <cmath>

#include "../backends/op_cases.h"
#include "backends/cpu/cpu_backend.h"
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
  switch (op) {
    case OpKind::kTranspose:
    case OpKind::kLayoutToNHWC:
    case OpKind::kLayoutToNCHW:
    case OpKind::kSlice:
    case OpKind::kConcat:
    case OpKind::kGather:
    case OpKind::kMaxPool: return 1e-3;
    case OpKind::kRelu:
    case OpKind::kRelu6:
    case OpKind::kGelu:
    case OpKind::kTanh:
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kScaleShift:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool: return 2e-3;
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

// Shapes whose channels, K and strides are multiples of 8 (the 16-byte paths), big enough for
// several tiles, plus batch-1 shapes the planner splits along K.
std::vector<OpCase> gpu_op_cases() {
  std::vector<OpCase> c;
  c.push_back(conv("3x3_c64_o96_bias_relu", Shape{1, 64, 14, 14}, 96, 3, 1, 1, 1, true, false, "relu"));
  c.push_back(conv("1x1_c256_o512_7x7_residual", Shape{1, 256, 7, 7}, 512, 1, 1, 0, 1, true, true, "relu"));
  c.push_back(conv("3x3_s2_c32_o64_odd_map", Shape{2, 32, 17, 15}, 64, 3, 2, 1, 1, true, false, "none"));
  c.push_back(conv("3x3_group4_c64", Shape{1, 64, 9, 9}, 64, 3, 1, 1, 4, false, false, "relu"));
  c.push_back(conv("3x3_c256_7x7_split_k", Shape{1, 256, 7, 7}, 256, 3, 1, 1, 1, true, false, "relu"));
  // K = 360: a multiple of 8 but not of the wgmma kernel's 64-wide K tile; N = 72 leaves a tail.
  c.push_back(conv("3x3_c40_o72_k_tail", Shape{2, 40, 30, 30}, 72, 3, 1, 1, 1, true, true, "relu"));
  c.push_back(conv("stem_7x7_c3_o64", Shape{1, 3, 57, 57}, 64, 7, 2, 3, 1, true, false, "relu"));
  c.push_back(conv("stem_3x3_c3_o32_residual", Shape{2, 3, 19, 23}, 32, 3, 1, 1, 1, false, true, "relu6"));
  c.push_back(conv("stem_3x3_c4_o24_s2", Shape{1, 4, 16, 15}, 24, 3, 2, 1, 1, true, false, "none"));
  c.push_back(conv("depthwise_c32_s1", Shape{2, 32, 13, 11}, 32, 3, 1, 1, 32, true, false, "relu6"));
  c.push_back(conv("depthwise_c64_s2_residual", Shape{1, 64, 14, 14}, 64, 3, 2, 1, 64, true, true, "none"));
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
  for (int i = 0; i < 50; ++i) many.push_back(act_input("p" + std::to_string(i), Shape{1, 8, 3, 3}, Layout::kNHWC));
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
  Operand ids = act_input("ids", Shape{3, 5});
  ids.dtype = DType::kI64;
  ids.index_limit = 40;
  c.push_back(make_case("gather_d64", OpKind::kGather, {}, {param("table", Shape{40, 64}), ids}));
  return c;
}

// Ops only the CPU backend runs (what imported ONNX models bring beyond the zoo's): the CUDA
// backend refuses them at load.
bool cuda_refuses(OpKind op) {
  switch (op) {
    case OpKind::kSub:
    case OpKind::kDiv:
    case OpKind::kPow:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kErf:
    case OpKind::kSqrt:
    case OpKind::kClip:
    case OpKind::kReduceMean:
    case OpKind::kCast: return true;
    default: return false;
  }
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> c;
  for (OpCase& shared : opcases::all_op_cases()) {
    if (!cuda_refuses(shared.op)) c.push_back(std::move(shared));
  }
  for (OpCase& g : gpu_op_cases()) c.push_back(std::move(g));
  return c;
}

TEST(GpuOps, RefusesOpsWithoutKernelAtLoadNamingTheOp) {
  ATL_REQUIRE_GPU();
  int refused = 0;
  for (const OpCase& c : opcases::all_op_cases()) {
    if (!cuda_refuses(c.op)) continue;
    const OpCaseData data = c.build(DType::kF16, 1);
    try {
      make_cuda_backend()->load(data.program, data.weights);
      ADD_FAILURE() << c.name << ": loaded an op the CUDA backend has no kernel for";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << c.name;
      EXPECT_NE(e.message().find(std::string(op_name(c.op))), std::string::npos) << e.message();
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

Tensor run_cpu(const OpCase& c, uint64_t seed, const std::vector<Tensor>& inputs) {
  const OpCaseData d32 = c.build(DType::kF32, seed);
  auto inst = make_cpu_backend()->load(d32.program, d32.weights);
  for (size_t i = 0; i < inputs.size(); ++i) inst->set_input(static_cast<int>(i), inputs[i]);
  inst->run();
  return inst->get_output(0);
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
}

INSTANTIATE_TEST_SUITE_P(AllOps, GpuOpTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

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
