// The model source behind colocate and DISB: a zoo model at a batch, compiled for a target, with
// zero weights for timing-only devices, and inputs that repeat from their seed.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "runtime/model_source.h"

namespace atl {
namespace {

bool all_zero(const Tensor& t) {
  const auto v = t.to(DType::kF32);
  const auto values = v.as<float>();
  return std::all_of(values.begin(), values.end(), [](float x) { return x == 0.0f; });
}

TEST(ModelSource, BatchAndSequenceLengthShapeTheInputs) {
  const CompiledModel cnn = compile_zoo_model({.name = "tiny_cnn", .batch = 8}, CompileTarget{}, false);
  ASSERT_FALSE(cnn.program.inputs.empty());
  EXPECT_EQ(cnn.program.inputs[0].shape[0], 8);
  const CompiledModel bert =
      compile_zoo_model({.name = "tiny_bert", .batch = 3, .seq_len = 16}, CompileTarget{}, false);
  ASSERT_FALSE(bert.program.inputs.empty());
  EXPECT_EQ(bert.program.inputs[0].shape[0], 3);
  EXPECT_EQ(bert.program.inputs[0].shape[1], 16);
  EXPECT_THROW(compile_zoo_model({.name = "resnet51"}, CompileTarget{}, false), Error);
}

TEST(ModelSource, TimingOnlyDevicesGetNoWeightsComputingOnesSeededWeights) {
  const CompiledModel timing = compile_zoo_model({.name = "tiny_cnn", .seed = 3}, CompileTarget{}, false);
  const CompiledModel computing = compile_zoo_model({.name = "tiny_cnn", .seed = 3}, CompileTarget{}, true);
  // The same program either way (weight values never shape it), weights only where they are read.
  EXPECT_EQ(timing.program.fingerprint, computing.program.fingerprint);
  EXPECT_TRUE(timing.weights.empty());
  ASSERT_EQ(computing.weights.size(), computing.program.weights.size());
  bool any_nonzero = false;
  for (const auto& [name, w] : computing.weights) any_nonzero |= !all_zero(w);
  EXPECT_TRUE(any_nonzero);
}

TEST(ModelSource, InflightCapWidensThePlansWindow) {
  EXPECT_EQ(compile_zoo_model({.name = "tiny_cnn"}, CompileTarget{}, false, 2).program.inflight_window, 4);
  EXPECT_EQ(compile_zoo_model({.name = "tiny_cnn"}, CompileTarget{}, false, 6).program.inflight_window, 6);
}

TEST(ModelSource, SeededInputsRepeatAndStayInRange) {
  const CompiledModel cnn = compile_zoo_model({.name = "tiny_cnn"}, CompileTarget{}, false);
  const std::vector<Tensor> a = seeded_inputs(cnn.program, 5), b = seeded_inputs(cnn.program, 5);
  const std::vector<Tensor> c = seeded_inputs(cnn.program, 6);
  ASSERT_EQ(a.size(), cnn.program.inputs.size());
  const auto va = a[0].as<float>(), vb = b[0].as<float>(), vc = c[0].as<float>();
  EXPECT_TRUE(std::equal(va.begin(), va.end(), vb.begin()));
  EXPECT_FALSE(std::equal(va.begin(), va.end(), vc.begin()));
  EXPECT_TRUE(std::all_of(va.begin(), va.end(), [](float x) { return x >= -1.0f && x < 1.0f; }));
  // Token indices are 0 or 1 (valid for every embedding table) and differ between seeds.
  const CompiledModel bert = compile_zoo_model({.name = "tiny_bert"}, CompileTarget{}, false);
  const std::vector<Tensor> ia = seeded_inputs(bert.program, 5), ic = seeded_inputs(bert.program, 6);
  bool some_ids_differ = false;
  for (size_t i = 0; i < ia.size(); ++i) {
    if (ia[i].dtype() != DType::kI64) continue;
    const auto x = ia[i].as<int64_t>(), y = ic[i].as<int64_t>();
    EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](int64_t v) { return v == 0 || v == 1; }));
    some_ids_differ = some_ids_differ || !std::equal(x.begin(), x.end(), y.begin());
  }
  EXPECT_TRUE(some_ids_differ);
}

}  // namespace
}  // namespace atl
