#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "l2/l2.h"
#include "l2_test_util.h"

namespace atl::l2 {
namespace {

using testing::tiny_device;
using testing::tiny_program;

TEST(L2Api, InfoOfAHandBuiltProgram) {
  const L2Info info = l2_info(tiny_program(), h200_l2());
  EXPECT_EQ(info.arena_bytes, 3392);
  EXPECT_EQ(info.slices, 1);
  EXPECT_EQ(info.setaside_max_slices, 37);  // 37.5 MiB holds 37 whole 1 MiB slices
  EXPECT_EQ(info.weight_bytes, 576 + 32);
  EXPECT_EQ(info.input_bytes, 800);
  EXPECT_EQ(info.output_bytes, 16);
  EXPECT_EQ(info.trace_accesses, 66);
  EXPECT_EQ(info.kernels, 3);
  const nlohmann::json j = info;
  EXPECT_EQ(j["device"]["name"], "h200");
  EXPECT_EQ(j["device"]["sets"], 30720);
  EXPECT_EQ(l2_info(tiny_program(), h200_l2(), 512).slices, 7);
}

// On the H200 the whole program fits: a cold inference misses once per distinct line
// (x 7, w0 5, w1 1, a0 13, a1 13, y 1 = 40 of 66 accesses) and reads only x, w0, w1 from DRAM;
// the flush writes the 27 dirty lines of a0, a1 and y.
TEST(L2Api, SimulateWithoutAConfig) {
  const Program p = tiny_program();
  const SimResult cold = simulate(p, h200_l2(), Policy::kLru, nullptr, {.warmup_passes = 0, .flush_at_end = true});
  EXPECT_EQ(cold.accesses, 66);
  EXPECT_EQ(cold.hits, 26);
  EXPECT_EQ(cold.dram_read_bytes, 13 * 128);
  EXPECT_EQ(cold.flush_write_bytes, 27 * 128);
  EXPECT_EQ(cold.dram_write_bytes, 27 * 128);
  EXPECT_EQ(cold.persisting_accesses, 0);
  EXPECT_EQ(cold.hints, "none");
  ASSERT_EQ(cold.kernels.size(), 3u);
  EXPECT_EQ(cold.kernels[1].name, "relu");
  EXPECT_EQ(cold.kernels[1].hits, 13);  // relu reads what conv just wrote
  // In steady state everything hits and nothing moves.
  const SimResult warm = simulate(p, h200_l2(), Policy::kShip, nullptr);
  EXPECT_EQ(warm.hits, 66);
  EXPECT_EQ(warm.dram_bytes(), 0);
}

TEST(L2Api, SimulateWithAConfigUsesItsHints) {
  const Program p = tiny_program();
  // Resident 512-byte slices 0 and 4: 16 hinted accesses when exact, 27 under the windows
  // (see the trace tests); a 1024-byte set-aside is 2 of the 4 ways.
  const ResidencyConfig c = make_config(p, tiny_device(), {true, false, false, false, true, false, false}, 1.0, 512);
  const SimResult exact =
      simulate(p, tiny_device(), Policy::kLru, &c, {.warmup_passes = 0, .hints = HintMode::kExactSlices});
  EXPECT_EQ(exact.persisting_accesses, 16);
  EXPECT_EQ(exact.geometry.persisting_ways, 2);
  EXPECT_EQ(exact.hints, "exact");
  const SimResult windows = simulate(p, tiny_device(), Policy::kLru, &c, {.warmup_passes = 0});
  EXPECT_EQ(windows.persisting_accesses, 27);
  const nlohmann::json j = windows;
  EXPECT_EQ(j["policy"], "lru");
  EXPECT_EQ(j["hints"], "windows");
  EXPECT_EQ(j["kernels"].size(), 3u);
  EXPECT_EQ(j["accesses"], 66);

  const ResidencyConfig other = make_config(tiny_program(8), tiny_device(), std::vector<bool>(7, false), 1.0, 512);
  EXPECT_THROW(simulate(p, tiny_device(), Policy::kLru, &other), Error);
  // A config sized for the tiny device does not fit the H200's set-aside steps.
  EXPECT_THROW(simulate(p, h200_l2(), Policy::kLru, &c), Error);
}

// A chain of GEMMs with ResNet-50-at-batch-8-like traffic (about 3 million line accesses, more
// than the L2 holds): activations of 12, 6, 3 and 1.5 MiB rotating through four 16 MiB arena
// buffers, 4 MiB (host f32, 2 MiB on the device) of weights per kernel.
Program synthetic_program() {
  constexpr int64_t kMiB = int64_t{1} << 20;
  constexpr int kKernels = 30;
  const int64_t activation_bytes[] = {12 * kMiB, 6 * kMiB, 3 * kMiB, 3 * kMiB / 2};
  const Shape weight_shape{kMiB};
  Program p;
  p.model = "synthetic";
  p.batch = 8;
  p.act_dtype = DType::kF16;
  p.arena_bytes = 64 * kMiB;
  for (int k = 0; k < kKernels; ++k) {
    const int64_t in = activation_bytes[(k / 8) % 4];
    const int64_t out = activation_bytes[((k + 1) / 8) % 4];
    p.weights.push_back({fmt::format("w{}", k), DType::kF32, weight_shape, Layout::kRowMajor});
    Kernel kernel;
    kernel.name = fmt::format("gemm{}", k);
    kernel.op = OpKind::kGemm;
    kernel.inputs = {testing::arena_binding((k % 4) * 16 * kMiB, Shape{in / 2}),
                     testing::tensor_binding(Binding::Kind::kWeight, k, DType::kF32, weight_shape)};
    kernel.outputs = {testing::arena_binding(((k + 1) % 4) * 16 * kMiB, Shape{out / 2})};
    p.kernels.push_back(std::move(kernel));
  }
  p.fingerprint = p.compute_fingerprint();
  verify_program(p);
  return p;
}

TEST(L2Api, SimulatorSpeedOnALargeTrace) {
  const Program p = synthetic_program();
  const L2Device d = h200_l2();
  std::vector<bool> resident(64);
  for (size_t s = 0; s < resident.size(); s += 2) resident[s] = true;
  const ResidencyConfig c = make_config(p, d, resident, 0.9);
  const int64_t accesses = l2_info(p, d).trace_accesses;
  std::printf("[ timing ] synthetic trace: %lld line accesses per inference, 1 warm-up pass\n",
              static_cast<long long>(accesses));
  for (Policy policy : {Policy::kLru, Policy::kShip, Policy::kShipSw, Policy::kBelady}) {
    const auto start = std::chrono::steady_clock::now();
    const SimResult r = simulate(p, d, policy, &c);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ timing ] %-8s %7.1f ms  hit rate %.3f  DRAM read %.1f MiB write %.1f MiB\n", policy_name(policy), ms,
                r.hit_rate(), static_cast<double>(r.dram_read_bytes) / (1 << 20),
                static_cast<double>(r.dram_write_bytes) / (1 << 20));
    EXPECT_EQ(r.accesses, accesses);
    EXPECT_GT(r.persisting_accesses, 0);
  }
  // Belady is optimal over the whole simulated sequence without a set-aside (with one, only
  // within each partition), so compare single cold passes without a config.
  const int64_t lru_misses = simulate(p, d, Policy::kLru, nullptr, {.warmup_passes = 0}).misses();
  EXPECT_GT(lru_misses, 0);
  EXPECT_LE(simulate(p, d, Policy::kBelady, nullptr, {.warmup_passes = 0}).misses(), lru_misses);
}

}  // namespace
}  // namespace atl::l2
