// The padding guard (sched/padding_guard.h): from RT tasks' device times with and without padding
// beside them, it pads beside the share of tasks that keeps the mean RT slowdown within budget.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "sched/padding_guard.h"
#include "scenario.h"

namespace atl::sched {
namespace {

struct GuardRun {
  int padded = 0;
  int alone = 0;
  double mean_slowdown = 0;  // over every task, against the alone time
};

// `tasks` RT tasks of one client taking 1 ms alone and (1 + cost) ms with padding beside them,
// with +-jitter of noise.
GuardRun run_guard(PaddingGuard& guard, int tasks, double cost, double jitter = 0, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(-jitter, jitter);
  GuardRun r;
  double extra = 0;
  for (int i = 0; i < tasks; ++i) {
    const bool pad = guard.pad_beside_next(0);
    const double ms = (pad ? 1 + cost : 1.0) * (1 + noise(rng));
    guard.record(0, static_cast<DeviceTime>(ms * 1e6), pad);
    ++(pad ? r.padded : r.alone);
    extra += pad ? cost : 0;
  }
  r.mean_slowdown = extra / tasks;
  return r;
}

TEST(PaddingGuard, OffPadsBesideEveryTask) {
  PaddingGuard guard(0);
  const GuardRun r = run_guard(guard, 100, 0.5);
  EXPECT_EQ(r.padded, 100);
  EXPECT_EQ(guard.slowdown(0), 0) << "off, it measures nothing";
}

TEST(PaddingGuard, CheapPaddingRunsBesideAllButTheCalibrationTasks) {
  PaddingGuard guard(0.01);
  const GuardRun r = run_guard(guard, 1600, 0.005);
  EXPECT_NEAR(guard.slowdown(0), 0.005, 1e-5);  // times are whole ns
  // The first task alone, then one in each calibration period.
  EXPECT_LE(r.alone, 1 + 1600 / PaddingGuard::kCalibrationPeriod + 1);
  EXPECT_GE(r.alone, 1600 / PaddingGuard::kCalibrationPeriod);
}

TEST(PaddingGuard, CostlyPaddingRunsBesideTheShareTheBudgetAllows) {
  for (const double cost : {0.02, 0.04, 0.10}) {
    PaddingGuard guard(0.01);
    const GuardRun r = run_guard(guard, 4000, cost, 0.02, 7);
    SCOPED_TRACE(::testing::Message() << "cost " << cost);
    // Each average holds about 31 samples of +-2% noise (sd 1.2%): the ratio's sd is about 0.5%.
    EXPECT_NEAR(guard.slowdown(0), cost, 0.015);
    EXPECT_NEAR(static_cast<double>(r.padded) / 4000, 0.01 / cost * (1 - 1.0 / PaddingGuard::kCalibrationPeriod),
                0.02 + 0.006 / cost);
    EXPECT_LE(r.mean_slowdown, 0.0115) << "the budget, within the estimate's noise";
    EXPECT_GT(r.padded, 0) << "it keeps padding some tasks, so it keeps measuring the cost";
  }
}

TEST(PaddingGuard, FollowsACostThatChanges) {
  PaddingGuard guard(0.01);
  run_guard(guard, 800, 0.005);
  const GuardRun costly = run_guard(guard, 1600, 0.08);
  EXPECT_NEAR(guard.slowdown(0), 0.08, 0.005);
  EXPECT_LT(static_cast<double>(costly.padded) / 1600, 0.2);
  const GuardRun cheap_again = run_guard(guard, 1600, 0.002);
  EXPECT_GT(static_cast<double>(cheap_again.padded) / 1600, 0.85);
}

TEST(PaddingGuard, ClientsAreMeasuredApart) {
  PaddingGuard guard(0.01);
  for (int i = 0; i < 400; ++i) {
    for (int client : {0, 1}) {
      const bool pad = guard.pad_beside_next(client);
      const double cost = client == 0 ? 0.002 : 0.05;
      guard.record(client, static_cast<DeviceTime>((pad ? 1 + cost : 1.0) * 1e6), pad);
    }
  }
  EXPECT_NEAR(guard.slowdown(0), 0.002, 1e-4);
  EXPECT_NEAR(guard.slowdown(1), 0.05, 1e-3);
}

TEST(PaddingGuard, RefusesANegativeClient) {
  PaddingGuard guard(0.01);
  EXPECT_THROW(guard.pad_beside_next(-1), Error);
}

// On the simulator, whose co-running kernels do not slow each other, the guard measures no cost
// and pads beside every task but the first and the calibration ones; answers stay exact.
TEST(PaddingGuard, SchedulerRunsTheCalibrationTasksAloneAndStillPads) {
  testing::Scenario s = testing::slices_scenario(Mode::kPaddingSlices, 12'000'000);
  s.padding_rt_budget = 0.01;
  const testing::ScenarioRun run = testing::run_scenario(s);
  ASSERT_GE(run.stats.rt_completed, 20);
  EXPECT_GE(run.stats.padding_guarded, 2) << "the first task, and one in the first calibration period";
  EXPECT_LE(run.stats.padding_guarded, 1 + run.stats.rt_completed / PaddingGuard::kCalibrationPeriod + 1);
  EXPECT_GT(run.stats.padded_slices + run.stats.padded_kernels, run.stats.rt_completed / 2);
  EXPECT_EQ(run.stats.failed, 0);
  testing::expect_outputs_match_unpreempted(run);
  s.padding_rt_budget = 0;
  EXPECT_EQ(testing::run_scenario(s).stats.padding_guarded, 0) << "off";
}

}  // namespace
}  // namespace atl::sched
