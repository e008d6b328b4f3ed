#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "../l2/l2_test_util.h"
#include "core/error.h"
#include "l2/evaluator.h"
#include "l2/l2.h"
#include "tune/tuner.h"

namespace atl::tune {
namespace {

using l2::testing::tiny_device;
using l2::testing::tiny_program;

// tiny_program in 512-byte slices: a0 [0, 1600) spans slices 0-3, a1 [1792, 3392) slices 3-6.
// conv writes a0, relu reads a0 and writes a1, pool reads a1.
TEST(SimEvaluator, SliceUsesFollowTheArenaBindings) {
  const std::vector<l2::SliceUse> uses = l2::slice_uses(tiny_program(), 512);
  ASSERT_EQ(uses.size(), 7u);
  for (int s : {0, 1, 2}) EXPECT_EQ(uses[s].first_kernel, 0) << s;
  for (int s : {0, 1, 2, 4, 5, 6}) EXPECT_EQ(uses[s].kernels, 2) << s;
  EXPECT_EQ(uses[3].kernels, 3);
  EXPECT_EQ(uses[3].first_kernel, 0);
  EXPECT_EQ(uses[4].first_kernel, 1);
}

TEST(SimEvaluator, CostIsTheSimulatedDramTraffic) {
  const Program p = tiny_program();
  l2::SimEvaluator ev(p, tiny_device(), l2::Policy::kLru, 1.0, {.warmup_passes = 0}, 512);
  EXPECT_EQ(ev.slices(), 7);
  EXPECT_EQ(ev.setaside_slices(), 2);
  EXPECT_TRUE(ev.deterministic());
  const l2::Residency resident = {true, false, false, false, true, false, false};
  const l2::Fitness f = ev.evaluate(resident);
  const l2::ResidencyConfig c = ev.config(resident);
  const l2::SimResult r = l2::simulate(p, tiny_device(), l2::Policy::kLru, &c, {.warmup_passes = 0});
  EXPECT_EQ(f.dram_bytes, r.dram_bytes());
  EXPECT_DOUBLE_EQ(f.cost, r.dram_bytes() / 1048576.0);
  const l2::Fitness none = ev.evaluate(l2::Residency(7, false));
  EXPECT_EQ(none.dram_bytes,
            l2::simulate(p, tiny_device(), l2::Policy::kLru, nullptr, {.warmup_passes = 0}).dram_bytes());
  EXPECT_THROW(ev.evaluate(l2::Residency(6, false)), Error);
}

// What the tuner writes loads back through the config loader and matches its Program.
TEST(SimEvaluator, TunedConfigRoundTrips) {
  const Program p = tiny_program();
  l2::SimEvaluator ev(p, tiny_device(), l2::Policy::kLru, 0.9, {.warmup_passes = 0}, 512);
  TuneOptions o;
  o.max_steps = 200;
  const TuneResult r = tune(ev, Optimizer::kEa, o);
  EXPECT_LE(r.best_fitness.cost, r.none_fitness.cost);
  const std::string path = ::testing::TempDir() + "tuned_l2.json";
  l2::save_config(ev.config(r.best), path);
  const l2::ResidencyConfig loaded = l2::load_config(path);
  std::remove(path.c_str());
  EXPECT_NO_THROW(loaded.check_matches(p));
  EXPECT_NO_THROW(loaded.check_fits(tiny_device()));
  EXPECT_EQ(loaded.resident, r.best);
  EXPECT_EQ(loaded.hit_ratio, 0.9);
}

}  // namespace
}  // namespace atl::tune
