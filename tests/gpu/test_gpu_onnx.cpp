// An imported ONNX model built from the ops the zoo does not use (MobileNet-v3's HardSwish and
// HardSigmoid, BERT exports' Sub, Div, Pow, Sqrt, ReduceMean, Erf and Cast, plus Sigmoid and
// Clip): compiled for the CUDA target, every kernel is accepted by the CUDA registry (no GPU
// needed: that checks the layouts and dtypes the compiler gives these ops), and on a GPU it
// matches the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "../onnx/onnx_builder.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/launch.h"
#include "compile/compiler.h"
#include "core/rng.h"
#include "gpu_test_util.h"
#include "onnx/onnx_import.h"

namespace atl {
namespace {

using onnxtest::ModelBuilder;

constexpr int64_t kOnnxMathBatch = 2;

std::vector<float> wave(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * static_cast<float>(i) + 0.3f);
  return v;
}

// x[B, 8, 6, 6] -> Conv (NHWC) -> HardSwish * HardSigmoid - Cast(mask) -> normalized over the
// channels with ReduceMean, Sub, Sqrt and Div -> Clip(Erf(.)) + Pow(Sigmoid(.), 3).
Graph onnx_math_model() {
  ModelBuilder m;
  m.input("x", {-1, 8, 6, 6}).input("mask", {-1, 8, 6, 6}, onnx::TensorProto::INT64).output("y");
  m.initializer("w", {8, 8, 3, 3}, wave(8 * 8 * 9, 0.2f));
  m.initializer("b", {8}, wave(8, 0.1f));
  m.initializer("eps", {1}, {1e-3f});
  m.initializer("three", {1}, {3.0f});
  m.initializer("lo", {}, {-0.75f});
  m.initializer("hi", {}, {0.5f});
  ModelBuilder::ints_attr(m.node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  m.node("HardSwish", {"c"}, {"h"});
  m.node("HardSigmoid", {"c"}, {"g"});
  m.node("Mul", {"h", "g"}, {"p"});
  ModelBuilder::int_attr(m.node("Cast", {"mask"}, {"m"}), "to", onnx::TensorProto::FLOAT);
  m.node("Sub", {"p", "m"}, {"q"});
  auto& mean = m.node("ReduceMean", {"q"}, {"mu"});
  ModelBuilder::ints_attr(mean, "axes", {1});
  ModelBuilder::int_attr(mean, "keepdims", 1);
  m.node("Sub", {"q", "mu"}, {"s"});
  m.node("Mul", {"s", "s"}, {"s2"});
  auto& var = m.node("ReduceMean", {"s2"}, {"var"});
  ModelBuilder::ints_attr(var, "axes", {1});
  ModelBuilder::int_attr(var, "keepdims", 1);
  m.node("Add", {"var", "eps"}, {"ve"});
  m.node("Sqrt", {"ve"}, {"sd"});
  m.node("Div", {"s", "sd"}, {"n"});
  m.node("Erf", {"n"}, {"e"});
  m.node("Clip", {"e", "lo", "hi"}, {"cl"});
  m.node("Sigmoid", {"n"}, {"sg"});
  m.node("Pow", {"sg", "three"}, {"pw"});
  m.node("Add", {"cl", "pw"}, {"y"});
  OnnxImportOptions o;
  o.batch = kOnnxMathBatch;
  return import_onnx_bytes(m.bytes(), ".", o);
}

// Needs no GPU.
TEST(GpuOnnx, CudaRegistryAcceptsEveryImportedOpKernelTheCompilerEmits) {
  CompileTarget target;
  target.act_dtype = DType::kF16;
  target.alignment = 256;
  const CompiledModel cm = compile_graph(onnx_math_model(), target);
  const gputest::PrepareOnlyContext ctx(cm.program);
  std::set<OpKind> seen;
  bool nhwc_operand = false;
  for (const Kernel& k : cm.program.kernels) {
    if (!gputest::is_imported_op(k.op)) continue;
    seen.insert(k.op);
    for (const Binding& b : k.inputs) nhwc_operand |= b.layout == Layout::kNHWC;
    EXPECT_NO_THROW(cuda::prepare_launch(k, ctx)) << "kernel '" << k.name << "' (" << op_name(k.op) << ")";
  }
  EXPECT_EQ(seen.size(), 11u) << "the model should use all eleven imported ops";
  EXPECT_TRUE(nhwc_operand) << "HardSwish and HardSigmoid after the convolution should run NHWC";
}

std::vector<Tensor> onnx_math_inputs(uint64_t seed) {
  Rng rng(seed, "onnx_math");
  Tensor x(DType::kF32, Shape{kOnnxMathBatch, 8, 6, 6});
  for (float& v : x.as<float>()) v = rng.uniform(-3.0f, 3.0f);
  Tensor mask(DType::kI64, Shape{kOnnxMathBatch, 8, 6, 6});
  for (int64_t& v : mask.as<int64_t>()) v = static_cast<int64_t>(rng.next_u64() % 3);
  return {x, mask};
}

Tensor run_onnx_math(Backend& backend, const std::vector<Tensor>& inputs) {
  const CompiledModel cm = compile_graph(onnx_math_model(), backend.target());
  auto inst = backend.load(cm.program, cm.weights);
  for (size_t i = 0; i < inputs.size(); ++i) inst->set_input(static_cast<int>(i), inputs[i]);
  inst->run();
  return inst->get_output(0);
}

TEST(GpuOnnx, ImportedModelWithMathOpsMatchesCpu) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const std::vector<Tensor> inputs = onnx_math_inputs(seed);
  const Tensor want = run_onnx_math(*make_cpu_backend(), inputs);
  const Tensor got = run_onnx_math(*make_cuda_backend(), inputs);
  EXPECT_LE(gputest::rel_l2(got, want), 1e-2);
}

// BERT exports' additive mask: scores + (1 - mask) * float32's lowest -> Softmax. Stored as fp16
// the constant would be -inf and 0 * -inf NaN at every unmasked key; saturated it is -65504.
Graph masked_softmax_model() {
  ModelBuilder m;
  m.input("scores", {-1, 4, 16}).input("mask", {-1, 1, 16}, onnx::TensorProto::INT64).output("p");
  m.initializer("one", {}, {1.0f});
  m.initializer("lowest", {}, {std::numeric_limits<float>::lowest()});
  ModelBuilder::int_attr(m.node("Cast", {"mask"}, {"m"}), "to", onnx::TensorProto::FLOAT);
  m.node("Sub", {"one", "m"}, {"inv"});
  m.node("Mul", {"inv", "lowest"}, {"additive"});
  m.node("Add", {"scores", "additive"}, {"masked"});
  ModelBuilder::int_attr(m.node("Softmax", {"masked"}, {"p"}), "axis", -1);
  OnnxImportOptions o;
  o.batch = kOnnxMathBatch;
  return import_onnx_bytes(m.bytes(), ".", o);
}

TEST(GpuOnnx, MaskScaledByFloatLowestStaysFiniteAndMatchesCpu) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed, "masked_softmax");
  Tensor scores(DType::kF32, Shape{kOnnxMathBatch, 4, 16});
  for (float& v : scores.as<float>()) v = rng.uniform(-4.0f, 4.0f);
  Tensor mask(DType::kI64, Shape{kOnnxMathBatch, 1, 16});
  auto mv = mask.as<int64_t>();
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = (i % 16) < 11 ? 1 : 0;  // the last 5 keys padded
  auto run = [&](Backend& backend) {
    const CompiledModel cm = compile_graph(masked_softmax_model(), backend.target());
    auto inst = backend.load(cm.program, cm.weights);
    inst->set_input(0, scores);
    inst->set_input(1, mask);
    inst->run();
    return inst->get_output(0).to(DType::kF32);
  };
  const Tensor want = run(*make_cpu_backend());
  const Tensor got = run(*make_cuda_backend());
  for (float v : got.as<float>()) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LE(gputest::rel_l2(got, want), 1e-2);
}

}  // namespace
}  // namespace atl
