// Every op case on the CPU backend against its naive double-precision reference.
// ATOLL_OP_PERF=1 also prints the median run time of each case.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "../test_env.h"
#include "backends/cpu/cpu_backend.h"
#include "core/rng.h"
#include "op_cases.h"

namespace atl {
namespace opcases {
// gtest prints a failing parameter with this instead of its raw bytes.
void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.name;
}
}  // namespace opcases

namespace {

using opcases::OpCase;
using opcases::OpCaseData;

// fp32 kernels against a double reference: only accumulation-order rounding remains.
constexpr double kTolerance = 1e-4;

class CpuOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(CpuOpTest, MatchesReference) {
  const OpCase& c = GetParam();
  const uint64_t seed = fnv1a64(c.name);
  const OpCaseData data = c.build(DType::kF32, seed);
  auto backend = make_cpu_backend();
  auto inst = backend->load(data.program, data.weights);
  for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
  inst->run();
  const std::vector<Tensor> want = c.reference(data);
  ASSERT_EQ(want.size(), data.program.outputs.size());
  std::vector<Tensor> first;
  for (size_t i = 0; i < want.size(); ++i) {
    first.push_back(inst->get_output(static_cast<int>(i)));
    EXPECT_LE(opcases::max_rel_error(first.back(), want[i]), kTolerance) << c.name << " output " << i;
  }
  // Reuse: a second run over the same inputs gives bit-identical results.
  inst->run();
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor again = inst->get_output(static_cast<int>(i));
    EXPECT_EQ(std::memcmp(again.raw(), first[i].raw(), again.nbytes()), 0) << c.name << " output " << i;
  }
  if (test::perf_mode()) {
    constexpr int kIters = 20;
    std::vector<double> ms;
    for (int it = 0; it < kIters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      inst->run();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(ms.begin(), ms.begin() + kIters / 2, ms.end());
    std::printf("[perf] %-40s %9.4f ms\n", c.name.c_str(), ms[kIters / 2]);
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, CpuOpTest, ::testing::ValuesIn(opcases::all_op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

// Every case again on the data of another seed, so a match is not down to one lucky draw.
TEST(CpuOps, SecondSeedAlsoMatches) {
  for (const OpCase& c : opcases::all_op_cases()) {
    const OpCaseData data = c.build(DType::kF32, 12345);
    auto inst = make_cpu_backend()->load(data.program, data.weights);
    for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
    inst->run();
    EXPECT_LE(opcases::max_rel_error(inst->get_output(0), c.reference(data)[0]), kTolerance) << c.name;
  }
}

TEST(CpuOps, PoisonedOutputFails) {
  const OpCase c = opcases::all_op_cases().front();
  const OpCaseData data = c.build(DType::kF32, 7);
  auto inst = make_cpu_backend()->load(data.program, data.weights);
  for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
  // Not run: every output element is still the load-time poison.
  const Tensor unwritten = inst->get_output(0);
  for (float v : unwritten.as<float>()) ASSERT_TRUE(std::isnan(v));
  EXPECT_EQ(opcases::max_rel_error(unwritten, c.reference(data)[0]), std::numeric_limits<double>::infinity());
}

TEST(CpuOps, ErrorMetric) {
  Tensor want(DType::kF32, Shape{4});
  Tensor got(DType::kF32, Shape{4});
  auto w = want.as<float>();
  auto g = got.as<float>();
  const float values[4] = {1.0f, -2.0f, 1e-6f, 4.0f};
  for (size_t i = 0; i < 4; ++i) w[i] = g[i] = values[i];
  EXPECT_EQ(opcases::max_rel_error(got, want), 0.0);
  g[3] = 4.004f;
  EXPECT_NEAR(opcases::max_rel_error(got, want), 1e-3, 1e-6);
  // A tiny expected value is judged against the output's RMS (~2.29), not against itself.
  g[3] = 4.0f;
  g[2] = 1e-6f + 2.29e-3f;
  EXPECT_NEAR(opcases::max_rel_error(got, want), 1e-3, 1e-5);
  EXPECT_EQ(opcases::max_rel_error(got.reshaped(Shape{2, 2}), want), std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace atl
