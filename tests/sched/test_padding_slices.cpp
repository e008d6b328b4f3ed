// padding-slices: a BE kernel too long to fit beside the RT task whole runs beside it in slices
// of its units, and a grid-stride one whole on a capped grid. The fit rules for a slice and a
// capped grid alone (by SM spread, not slot share), as properties over random windows, and whole
// runs on the simulated GPU with numerics: every unit of every sliced kernel runs, none twice
// while its kernel is in flight, every answer is bit for bit the unpreempted one, and the slices
// and capped grids of every BE lane together leave the RT kernels their SMs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "backends/sim/sim_gpu.h"
#include "scenario.h"
#include "sched/padding.h"

namespace atl::sched {
namespace {

using testing::Scenario;
using testing::ScenarioRun;
using testing::run_scenario;
using testing::slices_scenario;

// RT kernels `ns` long on grids of `grid` blocks, 2 resident per SM, on `sms` SMs, as the
// scheduler reads them from a profile: slot share grid / (2 x sms), spread grid / sms.
KernelCosts rt_costs(const std::vector<DeviceTime>& ns, const std::vector<int64_t>& grid, int sms = 100) {
  ModelProfile p;
  p.sm_count = sms;
  for (size_t i = 0; i < ns.size(); ++i) {
    KernelProfile k;
    k.time_us = static_cast<double>(ns[i]) / 1e3;
    k.grid_blocks = grid[i];
    k.resident_blocks_per_sm = 2;
    k.sm_share = sm_share_of(grid[i], 2, sms);
    p.kernels.push_back(k);
  }
  return KernelCosts::from(p);
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

// One grid-stride BE kernel, `ns` on its full grid of `grid` blocks, 2 resident per SM on `sms`
// SMs, as the scheduler reads it from a profile.
KernelCosts grid_stride_kernel(DeviceTime ns, int64_t grid, int sms = 100) {
  ModelProfile p;
  p.sm_count = sms;
  KernelProfile k;
  k.time_us = static_cast<double>(ns) / 1e3;
  k.grid_blocks = grid;
  k.resident_blocks_per_sm = 2;
  k.sm_share = sm_share_of(grid, 2, sms);
  k.slice_units = 1;
  k.grid_stride = true;
  p.kernels.push_back(k);
  return KernelCosts::from(p);
}

// A random RT task for the property tests: 1-12 kernels on 1-300 SMs, grids up to twice the SMs,
// seen at a random point of a random kernel with BE work padded and uncertainty of its own.
struct RandomRtTask {
  std::vector<DeviceTime> ns;
  std::vector<int64_t> grid;
  int sms = 0;
  KernelCosts rt;
  int current = 0;
  RtWindow window;
  DeviceTime launch = 0;
};

RandomRtTask random_rt_task(std::mt19937_64& rng) {
  RandomRtTask t;
  const size_t n = 1 + rng() % 12;
  t.sms = static_cast<int>(1 + rng() % 300);
  t.ns.resize(n);
  t.grid.resize(n);
  for (size_t i = 0; i < n; ++i) {
    t.ns[i] = 1'000 + static_cast<DeviceTime>(rng() % 50'000);
    t.grid[i] = static_cast<int64_t>(1 + rng() % static_cast<uint64_t>(2 * t.sms));
  }
  t.rt = rt_costs(t.ns, t.grid, t.sms);
  t.current = static_cast<int>(rng() % n);
  t.window = rt_window(t.rt, t.current, 0, static_cast<DeviceTime>(rng() % 20'000));
  t.window.padded_spread = static_cast<double>(rng() % static_cast<uint64_t>(t.sms / 2 + 1)) / t.sms;
  t.window.padded_share = static_cast<double>(rng() % 100) / 100.0;  // the whole-kernel rule's: no bearing
  t.window.uncertainty_ns = static_cast<DeviceTime>(rng() % 3'000);
  t.launch = static_cast<DeviceTime>(rng() % 8'000);
  return t;
}

// That BE work of `blocks` blocks, busy `busy` ns once launched, ends before the RT kernels
// looked ahead at do (or the task does), and fits, one block per SM, beside every RT kernel it
// may overlap: an RT kernel's blocks reach min(grid, SMs) SMs, padded BE work holds
// padded_spread x SMs.
void expect_fits_in_time_and_sms(const RandomRtTask& t, int blocks, DeviceTime busy, int trial) {
  const RtWindow& w = t.window;
  ASSERT_GT(w.remaining_ns, 0);
  const size_t n = t.ns.size();
  DeviceTime ends_in = w.remaining_ns;
  auto last = static_cast<size_t>(t.current);
  while (ends_in < busy + t.launch + w.uncertainty_ns) {
    ++last;
    ASSERT_LT(last, n) << "trial " << trial << ": it outlasts the RT task";
    ASSERT_LE(last, static_cast<size_t>(t.current) + kPaddingLookahead);
    ends_in += t.ns[last];
  }
  const double padded_sms = w.padded_spread * t.sms;
  for (auto j = static_cast<size_t>(t.current); j <= std::min(n - 1, last + 1); ++j) {
    const auto rt_sms = static_cast<double>(std::min<int64_t>(t.grid[j], t.sms));
    ASSERT_LE(static_cast<double>(blocks) + rt_sms + padded_sms, t.sms + 1e-6) << "trial " << trial << ", RT kernel " << j;
  }
}

TEST(PaddingSliceFit, ALongKernelRunsInSlicesThatEndWithinTheRtTask) {
  const KernelCosts rt = rt_costs({20'000, 20'000, 20'000}, {50, 50, 50});
  const KernelCosts be = be_kernel(100'000, 1'000, 100);  // 10 rounds of 10 us
  const RtWindow w = rt_window(rt, 0, 0, 0);
  EXPECT_FALSE(fits_beside(be, 0, w, 5'000)) << "100 us whole, and the whole GPU";
  const SliceFit fit = slice_beside(be, 0, 0, w, 5'000);
  // 55 us left after the launch allowance: 5 rounds of 50 blocks (half the SMs are free).
  EXPECT_EQ(fit.blocks, 50);
  EXPECT_EQ(fit.units, 250);
  EXPECT_DOUBLE_EQ(fit.spread, 0.5);
  EXPECT_DOUBLE_EQ(fit.slot_share, 0.5) << "a wave of this BE kernel is one block per SM";
  const SliceFit tail = slice_beside(be, 0, 960, w, 5'000);
  EXPECT_EQ(tail.units, 40) << "only the units left";
  EXPECT_LE(tail.blocks, 40);
  EXPECT_EQ(slice_beside(be, 0, 1'000, w, 5'000).units, 0) << "nothing left";
  RtWindow padded = w;
  padded.padded_spread = 0.5;
  EXPECT_EQ(slice_beside(be, 0, 0, padded, 5'000).units, 0) << "no SM left beside the RT kernels";
  EXPECT_EQ(slice_beside(be, 0, 0, rt_window(rt, 2, 0, 15'000), 5'000).units, 0) << "5 us left: not one round";
  EXPECT_EQ(slice_beside(be, 0, 0, RtWindow{}, 0).units, 0) << "no RT kernel runs";
  KernelCosts whole_only = be;
  whole_only.units = {0};
  EXPECT_EQ(slice_beside(whole_only, 0, 0, w, 5'000).units, 0) << "a kernel without units runs whole";
}

// The SMs a slice takes are bounded by the most spread RT kernel it overlaps, not the current one.
TEST(PaddingSliceFit, BlocksFitBesideEveryRtKernelTheSliceOverlaps) {
  const KernelCosts rt = rt_costs({30'000, 30'000, 30'000}, {10, 80, 10});
  const KernelCosts be = be_kernel(100'000, 1'000, 100);
  const SliceFit fit = slice_beside(be, 0, 0, rt_window(rt, 0, 0, 0), 0);
  // Ending before RT kernel 1 starts still means fitting beside it (it may have begun): 0.2 of
  // the SMs from the start. The longest window, to the task's end, wins: 9 rounds of 20 blocks.
  EXPECT_EQ(fit.blocks, 20);
  EXPECT_EQ(fit.units, 20 * 9);
}

// An RT kernel holds every SM its blocks spread over, however few of the block slots it fills:
// slices fit beside it by spread, and BE kernels padded earlier take theirs too.
TEST(PaddingSliceFit, SlicesFitBySmSpreadNotSlotShare) {
  const KernelCosts be = be_kernel(100'000, 10'000, 132);  // 132 SMs, a block each
  const KernelCosts wide = rt_costs({50'000}, {132}, 132);
  EXPECT_DOUBLE_EQ(wide.share[0], 0.5) << "half the slots at 2 resident per SM";
  EXPECT_DOUBLE_EQ(wide.spread[0], 1.0) << "but a block on every SM";
  EXPECT_EQ(wide.sm_count, 132);
  EXPECT_EQ(slice_beside(be, 0, 0, rt_window(wide, 0, 0, 0), 0).units, 0) << "no SM left beside a full spread";
  const KernelCosts wider = rt_costs({50'000}, {400}, 132);
  EXPECT_DOUBLE_EQ(wider.spread[0], 1.0) << "more blocks than SMs spread over them all, no further";
  EXPECT_EQ(slice_beside(be, 0, 0, rt_window(wider, 0, 0, 0), 0).units, 0);

  const KernelCosts narrow = rt_costs({50'000}, {33}, 132);  // a quarter of the SMs
  const RtWindow w = rt_window(narrow, 0, 0, 0);
  const SliceFit fit = slice_beside(be, 0, 0, w, 0);
  EXPECT_EQ(fit.blocks, 99);
  EXPECT_DOUBLE_EQ(fit.spread, 0.75);
  EXPECT_EQ(fit.units, 99 * (50'000 / be.round_ns[0]));
  RtWindow padded = w;
  padded.padded_spread = 33.0 / 132;
  EXPECT_EQ(slice_beside(be, 0, 0, padded, 0).blocks, 66) << "a padded BE kernel holds its SMs";
  RtWindow slots_only = w;
  slots_only.padded_share = 0.9;
  EXPECT_EQ(slice_beside(be, 0, 0, slots_only, 0).blocks, 99) << "slot share is the whole-kernel rule's";
}

// Over random RT tasks and windows: a slice never takes more units than are left, never more
// SMs than every RT kernel it may overlap and the BE kernels padded before it leave, and its
// rounds end before the RT kernels looked ahead at do.
TEST(PaddingSliceFit, PropertyEverySliceFitsInTimeAndSms) {
  std::mt19937_64 rng(20261207);
  int sliced = 0;
  for (int trial = 0; trial < 20'000; ++trial) {
    const RandomRtTask t = random_rt_task(rng);
    const auto units = static_cast<int64_t>(1 + rng() % 3'000);
    const KernelCosts be = be_kernel(1'000 + static_cast<DeviceTime>(rng() % 400'000), units, t.sms);
    const int64_t done = static_cast<int64_t>(rng() % static_cast<uint64_t>(units));
    const SliceFit fit = slice_beside(be, 0, done, t.window, t.launch);
    if (fit.units == 0) continue;
    ++sliced;
    ASSERT_LE(fit.units, units - done);
    ASSERT_GE(fit.blocks, 1);
    ASSERT_LE(fit.blocks, fit.units);
    ASSERT_DOUBLE_EQ(fit.spread, static_cast<double>(fit.blocks) / t.sms);
    const DeviceTime busy = (fit.units + fit.blocks - 1) / fit.blocks * be.round_ns[0];
    expect_fits_in_time_and_sms(t, fit.blocks, busy, trial);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(sliced, 1'000);
}

TEST(PaddingCappedFit, AGridStrideKernelRunsWholeOnTheSmsTheRtKernelsLeave) {
  const KernelCosts rt = rt_costs({20'000, 20'000, 20'000}, {50, 50, 50});
  const KernelCosts be = grid_stride_kernel(10'000, 200);  // every slot of 100 SMs
  const RtWindow w = rt_window(rt, 0, 0, 0);
  EXPECT_FALSE(fits_beside(be, 0, w, 5'000)) << "its full grid takes every slot";
  EXPECT_EQ(slice_beside(be, 0, 0, w, 5'000).units, 0) << "its one unit is no tile";
  const SliceFit fit = capped_beside(be, 0, w, 5'000);
  // 50 SMs free: 10 us x 200 / 50 = 40 us, which ends within the task (55 us after the
  // launch allowance) but not before RT kernel 2 starts (35 us).
  EXPECT_EQ(fit.units, 1);
  EXPECT_EQ(fit.blocks, 50);
  EXPECT_DOUBLE_EQ(fit.spread, 0.5);
  EXPECT_DOUBLE_EQ(fit.slot_share, 0.25) << "50 of 200 slots";
  EXPECT_EQ(capped_beside(be, 0, rt_window(rt, 1, 0, 0), 5'000).units, 0) << "35 us left: 40 us does not fit";
  RtWindow padded = w;
  padded.padded_spread = 0.3;
  EXPECT_EQ(capped_beside(be, 0, padded, 5'000).units, 0) << "20 SMs: 100 us";
  padded.padded_spread = 0.5;
  EXPECT_EQ(capped_beside(be, 0, padded, 0).units, 0) << "no SM left beside the RT kernels";
  EXPECT_EQ(capped_beside(be, 0, RtWindow{}, 0).units, 0) << "no RT kernel runs";
  const SliceFit small = capped_beside(grid_stride_kernel(10'000, 8), 0, w, 5'000);
  EXPECT_EQ(small.blocks, 8) << "never more blocks than its full grid";
  EXPECT_EQ(capped_beside(be_kernel(10'000, 1, 100), 0, w, 5'000).units, 0) << "a one-tile GEMM is no grid-stride kernel";
}

// The largest grid wins among the windows that fit: a wide RT kernel ahead bounds the grid of
// a capped kernel reaching past it, so it ends before that kernel starts if it can.
TEST(PaddingCappedFit, TheLargestGridThatEndsInTimeWins) {
  const KernelCosts rt = rt_costs({30'000, 30'000, 30'000}, {20, 90, 10});
  const KernelCosts be = grid_stride_kernel(5'000, 200);
  const SliceFit fit = capped_beside(be, 0, rt_window(rt, 0, 0, 0), 0);
  // Before RT kernel 1 starts (30 us) it must still fit beside it (10 SMs: 100 us, no); on the
  // 10 SMs that leaves to the task's end (90 us) it takes 100 us: nothing fits...
  EXPECT_EQ(fit.units, 0);
  // ... but a kernel of half the time on those 10 SMs (50 us) fits by the task's end.
  const SliceFit half = capped_beside(grid_stride_kernel(2'500, 200), 0, rt_window(rt, 0, 0, 0), 0);
  EXPECT_EQ(half.blocks, 10);
  const KernelCosts narrow = rt_costs({30'000, 30'000, 30'000}, {20, 20, 90});
  EXPECT_EQ(capped_beside(be, 0, rt_window(narrow, 0, 0, 0), 0).blocks, 80) << "12.5 us on 80 SMs, before kernel 1";
}

// Over random RT tasks and windows: a capped grid never takes more SMs than every RT kernel it
// may overlap and the BE kernels padded before it leave, nor more blocks than its full grid, and
// its modelled time (ns x full grid / blocks, at least ns) ends before the RT kernels looked
// ahead at do.
TEST(PaddingCappedFit, PropertyEveryCappedGridFitsInTimeAndSms) {
  std::mt19937_64 rng(20261208);
  int capped = 0;
  for (int trial = 0; trial < 20'000; ++trial) {
    const RandomRtTask t = random_rt_task(rng);
    const auto full = static_cast<int64_t>(1 + rng() % static_cast<uint64_t>(2 * t.sms));
    const DeviceTime be_ns = 500 + static_cast<DeviceTime>(rng() % 8'000);
    const KernelCosts be = grid_stride_kernel(be_ns, full, t.sms);
    const SliceFit fit = capped_beside(be, 0, t.window, t.launch);
    if (fit.units == 0) continue;
    ++capped;
    ASSERT_EQ(fit.units, 1);
    ASSERT_GE(fit.blocks, 1);
    ASSERT_LE(fit.blocks, full);
    ASSERT_DOUBLE_EQ(fit.spread, static_cast<double>(fit.blocks) / t.sms);
    const DeviceTime busy = std::max(be_ns, (be_ns * full + fit.blocks - 1) / fit.blocks);
    expect_fits_in_time_and_sms(t, fit.blocks, busy, trial);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(capped, 1'000);
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

// Two BE lanes slicing beside RT kernels of 16 blocks on 132 SMs: the padded slices in flight at
// any moment hold at most the 116 SMs the RT kernels leave, each lane's slice counting the
// other's (Scheduler::Impl::pad_be_lanes sums their spread; without the sum they hold 232). By
// slot share one slice alone could take 248 blocks.
TEST(PaddingSlices, SlicesOfEveryLaneTogetherLeaveTheRtKernelsTheirSms) {
  Scenario s = slices_scenario(Mode::kPaddingSlices);
  s.numerics = false;
  s.be_clients = 2;
  const ScenarioRun run = run_scenario(s);
  std::vector<sim::SimLaunchRecord> padded;  // padded launches are the BE lanes' only unpreemptible ones
  for (InstanceId be : run.be_instances) {
    const size_t before = padded.size();
    for (const auto& r : run.launches_of(be)) {
      if (!r.preemptible) padded.push_back(r);
    }
    EXPECT_GT(padded.size(), before) << "instance " << be << " padded nothing: no other lane's slice to count";
  }
  int64_t most_held = 0;
  for (const auto& a : padded) {
    int64_t held = 0;  // blocks of the padded launches running as `a` starts, its own included
    for (const auto& b : padded) {
      if (b.start <= a.start && a.start < b.end) held += b.blocks;
    }
    most_held = std::max(most_held, held);
  }
  EXPECT_LE(most_held, s.gpu.sm_count - s.rt_shape.blocks);
  RecordProperty("blocks", fmt::format("most held {}, slices {}", most_held, run.stats.padded_slices));
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

// The BE model's grid-stride kernels (pools, activations, the classifier's flatten) fill both waves
// of slots, so they never fit whole beside the RT kernels: they run whole on capped grids, each
// on no more blocks than the RT kernels' SMs leave, for the time the model charges it, and every
// answer is exact.
TEST(PaddingCapped, GridStrideKernelsRunWholeOnCappedGridsAndEveryAnswerIsExact) {
  const Scenario s = slices_scenario(Mode::kPaddingSlices);
  const ScenarioRun run = run_scenario(s);
  EXPECT_GT(run.stats.padded_capped, 0);
  EXPECT_GT(run.stats.padded_slices, 0);
  RecordProperty("stats", fmt::format("RT {} BE {} capped {} slices {} padded kernels {}", run.stats.rt_completed,
                                      run.stats.be_completed, run.stats.padded_capped, run.stats.padded_slices,
                                      run.stats.padded_kernels));
  EXPECT_GE(run.stats.be_completed, 3);
  EXPECT_EQ(run.stats.failed, 0);
  testing::expect_outputs_match_unpreempted(run);
  const Program& be = testing::be_model().program;
  const DeviceTime whole_ns = 2 * s.be_shape.block_ns;  // two waves of slots
  int capped = 0;
  for (const auto& r : run.launches_of(run.be_instances[0])) {
    if (r.preemptible || !sim::sim_grid_stride(be.kernels[static_cast<size_t>(r.kernel)], r.kernel)) continue;
    EXPECT_FALSE(r.cut) << "padded launch " << r.seq;
    if (r.blocks == s.be_shape.blocks) continue;  // whole on its full grid, padded whole or run alone
    ++capped;
    EXPECT_LE(r.blocks, s.gpu.sm_count - s.rt_shape.blocks) << "capped launch " << r.seq;
    EXPECT_EQ(r.end - r.start, (whole_ns * s.be_shape.blocks + r.blocks - 1) / r.blocks) << "capped launch " << r.seq;
  }
  EXPECT_EQ(capped, run.stats.padded_capped);
}

// Without slices (padding-concurrent) nothing runs on a capped grid.
TEST(PaddingCapped, PaddingConcurrentCapsNoGrid) {
  const ScenarioRun run = run_scenario(slices_scenario(Mode::kPaddingConcurrent));
  EXPECT_EQ(run.stats.padded_capped, 0);
  EXPECT_EQ(run.stats.padded_slices, 0);
}

}  // namespace
}  // namespace atl::sched
