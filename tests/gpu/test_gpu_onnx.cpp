// An imported ONNX model built from the ops the zoo does not use (MobileNet-v3's HardSwish and
// HardSigmoid, BERT exports' Sub, Div, Pow, Sqrt, ReduceMean, Erf and Cast, plus Sigmoid and
// Clip): compiled for the CUDA target, every kernel is accepted by the CUDA registry (no GPU
// needed: that checks the layouts and dtypes the compiler gives these ops), and on a GPU it
// matches the CPU backend.
// Softmax over a graph input reads the f32 values the host sent (ONNX's keep_io_types).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
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

// Softmax straight over a graph input x[B, 6, 8], along the last axis (the row kernel) and along
// axis 1 (the strided kernel); or, with `bias`, over x + bias, an f16 intermediate.
Graph input_softmax_model(bool bias) {
  ModelBuilder m;
  m.input("x", {-1, 6, 8}).output("last").output("mid");
  std::string in = "x";
  if (bias) {
    std::vector<float> b(8);
    for (size_t j = 0; j < b.size(); ++j) b[j] = 0.25f * static_cast<float>(j) - 1.0f;  // exact in f16
    m.initializer("b", {8}, b);
    m.node("Add", {"x", "b"}, {"xb"});
    in = "xb";
  }
  ModelBuilder::int_attr(m.node("Softmax", {in}, {"last"}), "axis", -1);
  ModelBuilder::int_attr(m.node("Softmax", {in}, {"mid"}), "axis", 1);
  OnnxImportOptions o;
  o.batch = 4;
  return import_onnx_bytes(m.bytes(), ".", o);
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  float d = 0.0f;
  for (size_t i = 0; i < a.as<float>().size(); ++i) d = std::max(d, std::abs(a.as<float>()[i] - b.as<float>()[i]));
  return d;
}

// Runs the model on x; returns its outputs and, on CUDA, leaves the instance in `keep`.
std::vector<Tensor> run_input_softmax(Backend& backend, bool bias, const Tensor& x, std::unique_ptr<Instance>* keep) {
  const CompiledModel cm = compile_graph(input_softmax_model(bias), backend.target());
  auto inst = backend.load(cm.program, cm.weights);
  inst->set_input(0, x);
  inst->run();
  std::vector<Tensor> out = {inst->get_output(0), inst->get_output(1)};
  if (keep != nullptr) *keep = std::move(inst);
  return out;
}

// test_softmax_large_number (relative L2 0.489 when the input went through f16, where 10000..10003
// are 8 apart and 30000 or -20000 16 apart): item 0 around 10000 (its first row exactly 10000 +
// [0..7]), item 1 around 30000, item 2 around -20000 (the three at fresh offsets), item 3 around 0.
// What error is left is the f16 rounding of outputs (at most 2.4e-4 below 1) and __expf's.
TEST(GpuOnnx, SoftmaxOverLargeF32InputReadsItUnroundedAndMatchesCpu) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed, "large_softmax");
  float centres[4] = {10000.0f, 30000.0f, -20000.0f, 0.0f};
  for (int item = 0; item < 3; ++item) centres[item] += rng.uniform(-500.0f, 500.0f);
  Tensor x(DType::kF32, Shape{4, 6, 8});
  auto xv = x.as<float>();
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = centres[i / 48] + rng.uniform(-3.0f, 3.0f);
  for (size_t j = 0; j < 8; ++j) xv[j] = 10000.0f + static_cast<float>(j);
  std::unique_ptr<Instance> inst;
  const std::vector<Tensor> want = run_input_softmax(*make_cpu_backend(), false, x, nullptr);
  const std::vector<Tensor> got = run_input_softmax(*make_cuda_backend(), false, x, &inst);
  EXPECT_LE(max_abs_diff(got[0], want[0]), 2e-3f) << "softmax over the last axis";
  EXPECT_LE(max_abs_diff(got[1], want[1]), 2e-3f) << "softmax over axis 1";

  // Run again from poison: bit-identical, so the kernels left the f32 copy as it was.
  CudaInstance& gpu = gputest::as_cuda(*inst);
  gpu.poison(0xFF);
  inst->run();
  EXPECT_TRUE(gputest::same_bytes(inst->get_output(0), got[0]) && gputest::same_bytes(inst->get_output(1), got[1]))
      << "second run differs";
  // With the flag raised, each Softmax stops at entry: its poisoned output survives.
  const Program& program = gpu.program();
  int softmaxes = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    if (program.kernels[k].op != OpKind::kSoftmax) continue;
    ++softmaxes;
    gpu.poison(0xFF);
    gputest::set_flag(gpu.preempt_flag(), 1);
    gpu.launch(static_cast<int>(k), gpu.stream(), gpu.preempt_flag());
    EXPECT_TRUE(gputest::all_bytes_are(gpu.read_binding(program.kernels[k].outputs[0]), 0xFF))
        << "kernel '" << program.kernels[k].name << "' wrote while preempted";
    gputest::set_flag(gpu.preempt_flag(), 0);
  }
  EXPECT_EQ(softmaxes, 2);
}

// Softmax over an f16 intermediate (x + bias) keeps its f16 path. Inputs are multiples of 1/64 in
// [-2, 2), so x + bias is exact in f16 and the tolerance is the one above.
TEST(GpuOnnx, SoftmaxOverF16IntermediateMatchesCpu) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed, "intermediate_softmax");
  Tensor x(DType::kF32, Shape{4, 6, 8});
  for (float& v : x.as<float>()) v = std::floor(rng.uniform(-128.0f, 128.0f)) / 64.0f;
  const std::vector<Tensor> want = run_input_softmax(*make_cpu_backend(), true, x, nullptr);
  const std::vector<Tensor> got = run_input_softmax(*make_cuda_backend(), true, x, nullptr);
  EXPECT_LE(max_abs_diff(got[0], want[0]), 2e-3f) << "softmax over the last axis";
  EXPECT_LE(max_abs_diff(got[1], want[1]), 2e-3f) << "softmax over axis 1";
}

}  // namespace
}  // namespace atl
