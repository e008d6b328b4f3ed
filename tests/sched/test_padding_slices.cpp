// padding-slices: a BE kernel too long to fit beside the RT task whole runs beside it in slices
// of its units. The fit rule for a slice alone, as a property over random windows, and whole
// runs on the simulated GPU with numerics: every unit of every sliced kernel runs, none twice
// while its kernel is in flight, and every answer is bit for bit the unpreempted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "scenario.h"
#include "sched/padding.h"

namespace atl::sched {
namespace {

using testing::Scenario;
using testing::ScenarioRun;

KernelCosts rt_costs(std::vector<DeviceTime> ns, std::vector<double> share) {
  KernelCosts c;
  c.ns = std::move(ns);
  c.share = std::move(share);
  return c;
}

// One BE kernel of `units` units in waves of `wave` blocks (one per SM), `ns` in all, as the
// scheduler reads it from a profile.
KernelCosts be_kernel(DeviceTime ns, int64_t units, int64_t wave) {
  ModelProfile p;
  p.sm_count = static_cast<int>(wave);
  KernelProfile k;
  k.time_us = static_cast<double>(ns) / 1e3;
  k.resident_blocks_per_sm = 1;
  k.sm_share = 1.0;
  k.slice_units = units;
  p.kernels.push_back(k);
  return KernelCosts::from(p);
}

TEST(PaddingSliceFit, ALongKernelRunsInSlicesThatEndWithinTheRtTask) {
  const KernelCosts rt = rt_costs({20'000, 20'000, 20'000}, {0.5, 0.5, 0.5});
  const KernelCosts be = be_kernel(100'000, 1'000, 100);  // 10 rounds of 10 us
  const RtWindow w = rt_window(rt, 0, 0, 0);
  EXPECT_FALSE(fits_beside(be, 0, w, 5'000)) << "100 us whole, and the whole GPU";
  const SliceFit fit = slice_beside(be, 0, 0, w, 5'000);
  // 55 us left after the launch allowance: 5 rounds of 50 blocks (half the SMs are free).
  EXPECT_EQ(fit.blocks, 50);
  EXPECT_EQ(fit.units, 250);
  EXPECT_DOUBLE_EQ(fit.share, 0.5);
  const SliceFit tail = slice_beside(be, 0, 960, w, 5'000);
  EXPECT_EQ(tail.units, 40) << "only the units left";
  EXPECT_LE(tail.blocks, 40);
  EXPECT_EQ(slice_beside(be, 0, 1'000, w, 5'000).units, 0) << "nothing left";
  RtWindow padded = w;
  padded.padded_share = 0.5;
  EXPECT_EQ(slice_beside(be, 0, 0, padded, 5'000).units, 0) << "no SM left beside the RT kernels";
  EXPECT_EQ(slice_beside(be, 0, 0, rt_window(rt, 2, 0, 15'000), 5'000).units, 0) << "5 us left: not one round";
  EXPECT_EQ(slice_beside(be, 0, 0, RtWindow{}, 0).units, 0) << "no RT kernel runs";
  KernelCosts whole_only = be;
  whole_only.units = {0};
  EXPECT_EQ(slice_beside(whole_only, 0, 0, w, 5'000).units, 0) << "a kernel without units runs whole";
}

// The share a slice takes is bounded by the busiest RT kernel it overlaps, not the current one.
TEST(PaddingSliceFit, BlocksFitBesideEveryRtKernelTheSliceOverlaps) {
  const KernelCosts rt = rt_costs({30'000, 30'000, 30'000}, {0.1, 0.8, 0.1});
  const KernelCosts be = be_kernel(100'000, 1'000, 100);
  const SliceFit fit = slice_beside(be, 0, 0, rt_window(rt, 0, 0, 0), 0);
  // Ending before RT kernel 1 starts still means fitting beside it (it may have begun): 0.2 of
  // the SMs from the start. The longest window, to the task's end, wins: 9 rounds of 20 blocks.
  EXPECT_EQ(fit.blocks, 20);
  EXPECT_EQ(fit.units, 20 * 9);
}

// Over random RT tasks and windows: a slice never takes more units than are left, never more
// SMs than every RT kernel it may overlap leaves, and its rounds end before the RT kernels
// looked ahead at do.
TEST(PaddingSliceFit, PropertyEverySliceFitsInTimeAndShare) {
  std::mt19937_64 rng(20261207);
  int sliced = 0;
  for (int trial = 0; trial < 20'000; ++trial) {
    const size_t n = 1 + rng() % 12;
    std::vector<DeviceTime> ns(n);
    std::vector<double> share(n);
    for (size_t i = 0; i < n; ++i) {
      ns[i] = 1'000 + static_cast<DeviceTime>(rng() % 50'000);
      share[i] = static_cast<double>(rng() % 100) / 100.0;
    }
    const KernelCosts rt = rt_costs(ns, share);
    const auto units = static_cast<int64_t>(1 + rng() % 3'000);
    const auto wave = static_cast<int64_t>(1 + rng() % 300);
    const KernelCosts be = be_kernel(1'000 + static_cast<DeviceTime>(rng() % 400'000), units, wave);
    const int64_t done = static_cast<int64_t>(rng() % static_cast<uint64_t>(units));
    const auto current = static_cast<int>(rng() % n);
    RtWindow w = rt_window(rt, current, 0, static_cast<DeviceTime>(rng() % 20'000));
    w.padded_share = static_cast<double>(rng() % 50) / 100.0;
    w.uncertainty_ns = static_cast<DeviceTime>(rng() % 3'000);
    const DeviceTime launch = static_cast<DeviceTime>(rng() % 8'000);
    const SliceFit fit = slice_beside(be, 0, done, w, launch);
    if (fit.units == 0) continue;
    ++sliced;
    ASSERT_GT(w.remaining_ns, 0);
    ASSERT_LE(fit.units, units - done);
    ASSERT_GE(fit.blocks, 1);
    ASSERT_LE(fit.blocks, fit.units);
    ASSERT_DOUBLE_EQ(fit.share, static_cast<double>(fit.blocks) / static_cast<double>(wave));
    const DeviceTime busy = (fit.units + fit.blocks - 1) / fit.blocks * be.round_ns[0];
    // The slice ends before RT kernel `last` ends (or the task does), and fits beside each
    // RT kernel up to there.
    DeviceTime ends_in = w.remaining_ns;
    size_t last = static_cast<size_t>(current);
    while (ends_in < busy + launch + w.uncertainty_ns) {
      ++last;
      ASSERT_LT(last, n) << "trial " << trial << ": the slice outlasts the RT task";
      ASSERT_LE(last, static_cast<size_t>(current) + kPaddingLookahead);
      ends_in += ns[last];
    }
    for (size_t j = static_cast<size_t>(current); j <= std::min(n - 1, last + 1); ++j) {
      ASSERT_LE(fit.share + w.padded_share + share[j], 1.0 + 1e-9) << "trial " << trial << ", RT kernel " << j;
    }
  }
  EXPECT_GT(sliced, 1'000);
}

// RT kernels of 16 blocks x 20 us leave 94% of the slots idle; BE kernels of two full waves
// (528 blocks x 10 us) never fit whole beside them but run in slices. RT arrivals every
// 0.3-0.5 ms keep RT mode busy; numerics check every answer.
Scenario slices_scenario(Mode mode) {
  Scenario s;
  s.mode = mode;
  s.numerics = true;
  s.be_clients = 1;
  s.rt_shape = {16, 20'000};
  s.be_shape = {528, 10'000};
  s.rt_period = 300'000;
  s.rt_jitter = 200'000;
  s.rt_until = 6'000'000;
  s.be_until = 6'000'000;
  return s;
}

TEST(PaddingSlices, LongBeKernelsRunInSlicesAndEveryAnswerIsExact) {
  const ScenarioRun run = run_scenario(slices_scenario(Mode::kPaddingSlices));
  EXPECT_GE(run.stats.rt_completed, 8);
  // A slice reaches to the end of what the RT task has left in view, so about one per task.
  EXPECT_GE(run.stats.padded_slices, run.stats.rt_completed / 2);
  RecordProperty("stats", fmt::format("RT {} BE {} slices {} padded kernels {}", run.stats.rt_completed,
                                      run.stats.be_completed, run.stats.padded_slices, run.stats.padded_kernels));
  EXPECT_GE(run.stats.be_completed, 3);
  EXPECT_EQ(run.stats.failed, 0);
  testing::expect_outputs_match_unpreempted(run);
  // Slices are never cut: they end within the RT task's time, so the flag never reaches them.
  for (const auto& r : run.launches_of(run.be_instances[0])) {
    if (!r.preemptible) {
      EXPECT_FALSE(r.cut) << "padded launch " << r.seq;
    }
  }
}

// The same scenario without slices: BE kernels this long never pad whole, so slices are the BE
// work done while RT tasks run, at no cost to RT latency on the model.
TEST(PaddingSlices, BeatsPaddingWithoutSlicesOnBeWorkAtTheSameRtLatency) {
  const ScenarioRun sliced = run_scenario(slices_scenario(Mode::kPaddingSlices));
  const ScenarioRun whole = run_scenario(slices_scenario(Mode::kPaddingConcurrent));
  const ScenarioRun alone = run_scenario(slices_scenario(Mode::kRtOnly));
  EXPECT_EQ(whole.stats.padded_slices, 0);
  EXPECT_GT(sliced.stats.padded_slices, 0);
  EXPECT_GE(sliced.stats.be_completed, whole.stats.be_completed);
  EXPECT_LE(testing::rt_p50(sliced), testing::rt_p50(alone) * 103 / 100);
  RecordProperty("be_completed", fmt::format("slices {} whole {}", sliced.stats.be_completed,
                                             whole.stats.be_completed));
}

}  // namespace
}  // namespace atl::sched
