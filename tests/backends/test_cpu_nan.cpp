// NaN flows through every CPU kernel as it does in PyTorch: a NaN input is never turned into a
// finite number (ReLU, clipping, max pooling, softmax all keep it).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "op_cases.h"

namespace atl {
namespace {

using opcases::OpCase;
using opcases::OpCaseData;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Outputs of the one-kernel program of `c` with every float input replaced by `fill(i)`.
template <typename Fill>
Tensor run_filled(const OpCase& c, Fill fill) {
  OpCaseData data = c.build(DType::kF32, 7);
  auto inst = make_cpu_backend()->load(data.program, data.weights);
  for (size_t i = 0; i < data.inputs.size(); ++i) {
    Tensor& in = data.inputs[i];
    if (in.dtype() == DType::kF32) {
      auto v = in.as<float>();
      for (size_t j = 0; j < v.size(); ++j) v[j] = fill(j, v[j]);
    }
    inst->set_input(static_cast<int>(i), in);
  }
  inst->run();
  return inst->get_output(0);
}

// Cases where some output element legitimately comes from a weight or index alone.
bool has_output_from_weights(const OpCase& c) {
  if (c.op == OpKind::kGather || c.op == OpKind::kCast) return true;  // the input is integers
  if (c.op != OpKind::kConcat) return false;
  for (const auto& o : c.operands)
    if (o.role == opcases::Operand::Role::kWeight) return true;
  return false;
}

TEST(CpuNaN, AllNaNInputGivesAllNaNOutputForEveryOp) {
  for (const OpCase& c : opcases::all_op_cases()) {
    if (has_output_from_weights(c)) continue;
    const Tensor out = run_filled(c, [](size_t, float) { return kNaN; });
    int64_t finite = 0;
    for (float v : out.as<float>()) finite += std::isnan(v) ? 0 : 1;
    EXPECT_EQ(finite, 0) << c.name << ": " << finite << " of " << out.numel() << " outputs are not NaN";
  }
}

TEST(CpuNaN, ReluKeepsSingleNaN) {
  const Tensor out = run_filled(opcases::find_op_case("relu"), [](size_t j, float v) { return j == 3 ? kNaN : v; });
  const auto y = out.as<float>();
  EXPECT_TRUE(std::isnan(y[3]));
  for (size_t j = 0; j < y.size(); ++j) {
    if (j == 3) continue;
    EXPECT_GE(y[j], 0.0f) << j;
  }
}

TEST(CpuNaN, Relu6KeepsNaNAndClipsInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor out = run_filled(opcases::find_op_case("relu6"), [&](size_t j, float v) {
    return j == 0 ? kNaN : j == 1 ? inf : j == 2 ? -inf : v;
  });
  const auto y = out.as<float>();
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 6.0f);
  EXPECT_EQ(y[2], 0.0f);
}

TEST(CpuNaN, MaxPoolWindowWithOneNaNIsNaN) {
  // NHWC storage: element 0 is (n 0, y 0, x 0, c 0), inside the first window of channel 0 only.
  const Tensor out = run_filled(opcases::find_op_case("maxpool_3x3_s2_p1"), [](size_t j, float v) { return j == 0 ? kNaN : v; });
  const auto y = out.as<float>();
  EXPECT_TRUE(std::isnan(y[0]));
  int64_t nans = 0;
  for (float v : y) nans += std::isnan(v) ? 1 : 0;
  EXPECT_EQ(nans, 1);  // the windows that do not see it stay finite
}

TEST(CpuNaN, SoftmaxRowWithNaNIsNaN) {
  // In logical (row-major) order the NaN shares a softmax line with element 0 but is not the
  // first element the running maximum sees.
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"softmax_last_axis", 1}, {"softmax_axis1", 12}, {"softmax_channels_nhwc", 12}};
  for (const auto& [name, nan_index] : cases) {
    const size_t at = nan_index;  // lambdas capture structured bindings only from clang 16
    const Tensor out = run_filled(opcases::find_op_case(name), [&](size_t j, float v) { return j == at ? kNaN : v; });
    EXPECT_TRUE(std::isnan(out.as<float>()[0])) << name;
  }
}

}  // namespace
}  // namespace atl
