// The imported models' ops on the CUDA backend beyond what the shared op cases compare: casts of
// f16 activations to integers (their outputs are not f32, which the op cases assume), and NaN
// flowing through the unary math kernels as it does through the CPU backend's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "../backends/op_cases.h"
#include "gpu_test_util.h"

namespace atl {
namespace {

using opcases::OpCase;
using opcases::OpCaseData;

OpCase math_case(std::string name, OpKind op, Attrs attrs, opcases::Operand x, Layout out_layout) {
  OpCase c;
  c.name = "gpu_math_" + std::move(name);
  c.op = op;
  c.attrs = std::move(attrs);
  c.operands = {std::move(x)};
  c.out_layout = out_layout;
  return c;
}

// f32 (stored f16) -> integers: the op cases give every output the activation dtype, so the
// built Program's output is retyped to what IR inference says a Cast to `to` produces.
OpCaseData float_to_int_program(const Shape& shape, DType to, uint64_t seed) {
  const std::string name = std::string("cast_f32_to_") + dtype_name(to) + "_" + std::to_string(shape.numel());
  const OpCase c = math_case(name, OpKind::kCast, {{"to", std::string(dtype_name(to))}},
                             opcases::act_input("x", shape, Layout::kRowMajor, 300.0f), Layout::kRowMajor);
  OpCaseData d = c.build(DType::kF16, seed);
  Binding& out = d.program.kernels[0].outputs[0];
  out.dtype = to;
  out.bytes = shape.numel() * static_cast<int64_t>(dtype_size(to));
  d.program.outputs[0].dtype = to;
  d.program.fingerprint = d.program.compute_fingerprint();
  verify_program(d.program);
  return d;
}

template <typename T>
void expect_truncated(const Tensor& got, const Tensor& x) {
  const auto y = got.as<T>();
  const auto v = x.as<float>();
  ASSERT_EQ(y.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(y[i], static_cast<T>(std::trunc(v[i]))) << "element " << i << " of value " << v[i];
  }
}

// 256 elements take the 16-byte path, 21 the scalar one.
TEST(GpuMathOps, CastsF16ToIntegersTruncatingTowardZero) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (const Shape& shape : {Shape{4, 64}, Shape{3, 7}}) {
    for (DType to : {DType::kI64, DType::kI32}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(to) << " " << shape.str());
      const OpCaseData d = float_to_int_program(shape, to, seed);
      auto inst = make_cuda_backend()->load(d.program, d.weights);
      inst->set_input(0, d.inputs[0]);
      gputest::as_cuda(*inst).poison(0xFF);
      inst->run();
      const Tensor got = inst->get_output(0);
      ASSERT_EQ(got.dtype(), to);
      if (to == DType::kI64) {
        expect_truncated<int64_t>(got, d.inputs[0]);
      } else {
        expect_truncated<int32_t>(got, d.inputs[0]);
      }
    }
  }
}

// i32 -> f32 (stored f16). Not a shared op case: for an i32 input the CPU backend takes i64
// request tensors and the CUDA backend i32 ones, and the op cases hand both the same tensors.
TEST(GpuMathOps, CastsI32ToF16ByValue) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (const Shape& shape : {Shape{4, 64}, Shape{3, 7}}) {
    opcases::Operand n = opcases::act_input("n", shape);
    n.dtype = DType::kI32;
    n.index_limit = 2048;  // exact in f16
    const OpCase c = math_case("cast_i32_to_f32_" + std::to_string(shape.numel()), OpKind::kCast,
                               {{"to", std::string("f32")}}, n, Layout::kRowMajor);
    const OpCaseData d = c.build(DType::kF16, seed);
    auto inst = make_cuda_backend()->load(d.program, d.weights);
    inst->set_input(0, d.inputs[0]);
    gputest::as_cuda(*inst).poison(0xFF);
    inst->run();
    EXPECT_EQ(opcases::max_rel_error(inst->get_output(0), c.reference(d)[0]), 0.0) << shape.str();
  }
}

// Every 7th input is NaN: exactly those outputs are NaN (Clip, HardSigmoid and HardSwish compare
// so that NaN fails the comparison and passes through), the rest finite. Both kernel paths, and
// NHWC storage.
TEST(GpuMathOps, NaNPassesThroughUnaryMath) {
  ATL_REQUIRE_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Attrs none;
  const std::pair<OpKind, Attrs> ops[] = {
      {OpKind::kClip, {{"min", -0.5}, {"max", 1.5}}}, {OpKind::kClip, {{"min", 0.0}}},
      {OpKind::kHardSigmoid, {{"alpha", 0.2}, {"beta", 0.5}}}, {OpKind::kHardSwish, none},
      {OpKind::kSigmoid, none}, {OpKind::kErf, none}, {OpKind::kSqrt, none}};
  const std::pair<Shape, Layout> shapes[] = {
      {Shape{2, 48, 40}, Layout::kRowMajor}, {Shape{3, 17, 5}, Layout::kRowMajor}, {Shape{2, 8, 5, 3}, Layout::kNHWC}};
  for (const auto& [op, attrs] : ops) {
    for (const auto& [shape, layout] : shapes) {
      opcases::Operand x = opcases::act_input("x", shape, layout, 4.0f);
      x.positive = op == OpKind::kSqrt;
      const OpCase c = math_case(std::string(op_name(op)), op, attrs, x, layout);
      SCOPED_TRACE(::testing::Message() << c.name << " " << shape.str());
      const OpCaseData d = c.build(DType::kF16, 3);
      auto inst = make_cuda_backend()->load(d.program, d.weights);
      Tensor in = d.inputs[0].clone();
      auto v = in.as<float>();
      for (size_t i = 0; i < v.size(); i += 7) v[i] = nan;
      inst->set_input(0, in);
      gputest::as_cuda(*inst).poison(0xFF);
      inst->run();
      const Tensor out = inst->get_output(0);
      const auto y = out.as<float>();
      ASSERT_EQ(y.size(), v.size());
      for (size_t i = 0; i < y.size(); ++i) {
        if (i % 7 == 0) {
          EXPECT_TRUE(std::isnan(y[i])) << "element " << i << " is " << y[i];
        } else {
          EXPECT_TRUE(std::isfinite(y[i])) << "element " << i << " is " << y[i] << " for input " << v[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace atl
