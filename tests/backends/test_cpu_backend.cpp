// The CPU backend's contract beyond numerics: load-time validation and errors, set_input /
// get_output checks, run_range, instance reuse and the memory report.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "compile/compiler.h"
#include "core/rng.h"
#include "models/zoo.h"
#include "op_cases.h"

namespace atl {
namespace {

using opcases::OpCase;
using opcases::OpCaseData;

// Runs f and returns the Error it throws; fails the test when it throws nothing.
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an atl::Error";
  return Error(ErrorCode::kInternal, "nothing thrown", __FILE__, __LINE__);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<Tensor> run_all(Instance& inst, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) inst.set_input(static_cast<int>(i), inputs[i]);
  inst.run();
  std::vector<Tensor> out;
  for (size_t i = 0; i < inst.program().outputs.size(); ++i) out.push_back(inst.get_output(static_cast<int>(i)));
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

Tensor random_image(const Shape& shape, uint64_t seed) {
  Tensor t(DType::kF32, shape);
  Rng rng(seed);
  for (auto& v : t.as<float>()) v = rng.normal();
  return t;
}

CompiledModel tiny_cnn() {
  ModelOptions opts;
  opts.seed = 5;
  return compile_graph(build_model("tiny_cnn", opts), make_cpu_backend()->target());
}

TEST(CpuBackend, Describes) {
  auto backend = make_cpu_backend();
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_EQ(backend->target().act_dtype, DType::kF32);
  EXPECT_FALSE(backend->device_description().empty());
}

TEST(CpuBackend, RejectsNonF32Activations) {
  const OpCaseData d = opcases::find_op_case("relu").build(DType::kF16, 1);
  const Error e = error_of([&] { make_cpu_backend()->load(d.program, d.weights); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(contains(e.message(), "f16")) << e.message();
}

TEST(CpuBackend, MissingWeightIsNotFound) {
  OpCaseData d = opcases::find_op_case("conv_3x3_s1_p1_bias_relu").build(DType::kF32, 1);
  d.weights.erase("bias");
  const Error e = error_of([&] { make_cpu_backend()->load(d.program, d.weights); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_TRUE(contains(e.message(), "'bias'")) << e.message();
}

TEST(CpuBackend, WeightShapeOrDtypeMismatchIsInvalidArgument) {
  OpCaseData d = opcases::find_op_case("conv_3x3_s1_p1_bias_relu").build(DType::kF32, 1);
  d.weights["bias"] = Tensor(DType::kF32, Shape{6});
  Error e = error_of([&] { make_cpu_backend()->load(d.program, d.weights); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(e.message(), "'bias'") && contains(e.message(), "[7]") && contains(e.message(), "[6]"))
      << e.message();
  d.weights["bias"] = Tensor(DType::kI64, Shape{7});
  e = error_of([&] { make_cpu_backend()->load(d.program, d.weights); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
}

TEST(CpuBackend, AcceptsConvWeightsShapedInStorageOrder) {
  const OpCase c = opcases::find_op_case("conv_3x3_s1_p1_bias_relu");
  OpCaseData d = c.build(DType::kF32, 3);
  const Shape& logical = d.weights.at("w").shape();  // [O, I, kh, kw]
  d.weights["w"] = d.weights.at("w").reshaped(Shape{logical[0], logical[2], logical[3], logical[1]});
  auto inst = make_cpu_backend()->load(d.program, d.weights);
  EXPECT_LE(opcases::max_rel_error(run_all(*inst, d.inputs)[0], c.reference(d)[0]), 1e-4);
}

TEST(CpuBackend, SetInputNamesInputAndShapes) {
  const OpCaseData d = opcases::find_op_case("conv_3x3_s1_p1_bias_relu").build(DType::kF32, 1);
  auto inst = make_cpu_backend()->load(d.program, d.weights);
  Error e = error_of([&] { inst->set_input(0, Tensor(DType::kF32, Shape{1, 5, 9, 10})); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(e.message(), "'x'") && contains(e.message(), "[1, 5, 9, 11]") &&
              contains(e.message(), "[1, 5, 9, 10]"))
      << e.message();
  e = error_of([&] { inst->set_input(0, Tensor(DType::kI64, Shape{1, 5, 9, 11})); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(e.message(), "f32") && contains(e.message(), "i64")) << e.message();
  EXPECT_EQ(error_of([&] { inst->set_input(2, d.inputs[0]); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { inst->get_output(1); }).code(), ErrorCode::kInvalidArgument);
}

TEST(CpuBackend, UnsupportedKernelIsNamed) {
  OpCaseData d = opcases::find_op_case("relu").build(DType::kF32, 1);
  d.program.kernels[0].op = OpKind::kBatchNorm;
  Error e = error_of([&] { make_cpu_backend()->load(d.program, d.weights); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(contains(e.message(), "kernel 'relu'")) << e.message();

  // A convolution whose input is not NHWC.
  d = opcases::find_op_case("conv_3x3_s1_p1_bias_relu").build(DType::kF32, 1);
  d.program.kernels[0].inputs[0].layout = Layout::kRowMajor;
  e = error_of([&] { make_cpu_backend()->load(d.program, d.weights); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(contains(e.message(), "conv_3x3_s1_p1_bias_relu") && contains(e.message(), "nhwc")) << e.message();
}

TEST(CpuBackend, GatherIndexOutOfRangeIsInvalidArgument) {
  OpCaseData d = opcases::find_op_case("gather_embedding").build(DType::kF32, 1);
  auto inst = make_cpu_backend()->load(d.program, d.weights);
  d.inputs[0].as<int64_t>()[3] = 50;  // the table has 50 rows
  inst->set_input(0, d.inputs[0]);
  const Error e = error_of([&] { inst->run(); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contains(e.message(), "index 50") && contains(e.message(), "gather_embedding")) << e.message();
}

TEST(CpuBackend, RunRangeInPiecesMatchesRun) {
  const CompiledModel m = tiny_cnn();
  const int n = static_cast<int>(m.program.kernels.size());
  ASSERT_GE(n, 6);
  const Tensor image = random_image(m.program.inputs[0].shape, 21);
  auto whole = make_cpu_backend()->load(m.program, m.weights);
  const Tensor expected = run_all(*whole, {image})[0];
  for (int split : {1, n / 3, n / 2, n - 1}) {
    auto inst = make_cpu_backend()->load(m.program, m.weights);
    inst->set_input(0, image);
    inst->run_range(0, split);
    inst->run_range(split, split);  // empty range: a no-op
    inst->run_range(split, n);
    inst->synchronize();
    EXPECT_TRUE(same_bytes(inst->get_output(0), expected)) << "split at kernel " << split;
  }
  EXPECT_EQ(error_of([&] { whole->run_range(2, 1); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { whole->run_range(0, n + 1); }).code(), ErrorCode::kInvalidArgument);
}

TEST(CpuBackend, InstanceReuseKeepsNoState) {
  const CompiledModel m = tiny_cnn();
  auto inst = make_cpu_backend()->load(m.program, m.weights);
  const Tensor a = random_image(m.program.inputs[0].shape, 1);
  const Tensor b = random_image(m.program.inputs[0].shape, 2);
  const Tensor out_a = run_all(*inst, {a})[0];
  const Tensor out_b = run_all(*inst, {b})[0];
  EXPECT_FALSE(same_bytes(out_a, out_b));
  EXPECT_TRUE(same_bytes(run_all(*inst, {a})[0], out_a));
  // A second instance of the same program agrees with the first.
  auto other = make_cpu_backend()->load(m.program, m.weights);
  EXPECT_TRUE(same_bytes(run_all(*other, {b})[0], out_b));
}

TEST(CpuBackend, MemoryReport) {
  const CompiledModel m = tiny_cnn();
  auto inst = make_cpu_backend()->load(m.program, m.weights);
  const MemoryReport r = inst->memory();
  int64_t weight_bytes = 0;
  for (const TensorSpec& s : m.program.weights) weight_bytes += s.shape.numel() * 4;
  EXPECT_EQ(r.weight_bytes, weight_bytes);
  EXPECT_EQ(r.arena_bytes, m.program.arena_bytes);
  EXPECT_EQ(r.io_bytes, (m.program.inputs[0].shape.numel() + m.program.outputs[0].shape.numel()) * 4);
  EXPECT_GT(r.workspace_bytes, 0);  // its 3x3 convolutions need an im2col buffer

  const OpCaseData relu = opcases::find_op_case("relu").build(DType::kF32, 1);
  EXPECT_EQ(make_cpu_backend()->load(relu.program, relu.weights)->memory().workspace_bytes, 0);
}

}  // namespace
}  // namespace atl
