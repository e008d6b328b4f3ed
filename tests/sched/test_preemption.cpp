// Reset-based preemption on the simulated GPU: how long RT work waits for BE work, RT latency
// against the other modes, and bit-identical outputs of preempted-and-resumed BE tasks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "scenario.h"

namespace atl::sched {
namespace {

using testing::Scenario;
using testing::ScenarioRun;
using testing::expect_outputs_match_unpreempted;

// Longest time an RT kernel waited for slots: from when it could start (visible, and the RT
// kernel before it on its stream done) to its first block.
DeviceTime longest_rt_wait(const ScenarioRun& run) {
  DeviceTime longest = 0, previous_end = 0;
  for (const auto& r : run.launches_of(run.rt_instance)) {
    const DeviceTime ready = std::max(r.visible, previous_end);
    longest = std::max(longest, r.start - ready);
    previous_end = r.end;
  }
  return longest;
}

int rt_tasks_that_preempted(const ScenarioRun& run) {
  int n = 0;
  for (const TaskResult& r : run.results(TaskClass::kRealTime)) n += r.preempted_tasks > 0;
  return n;
}

// BE grids of three full waves of 100 us blocks; RT kernels of 8 blocks of 5 us arriving at
// seeded random times.
Scenario block_bound_scenario(Mode mode, DeviceTime loop_check_ns) {
  Scenario s;
  s.mode = mode;
  s.gpu.loop_check_ns = loop_check_ns;
  s.be_shape = {3 * 264, 100'000};
  s.rt_shape = {8, 5'000};
  s.rt_period = 1'000'000;
  s.rt_jitter = 900'000;
  return s;
}

TEST(Preemption, ResetRtWaitsBehindAtMostOneBeBlock) {
  const DeviceTime block = 100'000;
  // Without loop checks running BE blocks run to their end: at most one block's time.
  const ScenarioRun reset = run_scenario(block_bound_scenario(Mode::kReset, 0));
  EXPECT_GE(rt_tasks_that_preempted(reset), 10);  // most RT arrivals found BE work running
  EXPECT_LE(longest_rt_wait(reset), block);
  EXPECT_GT(longest_rt_wait(reset), block / 2);  // and they did wait for running blocks

  // Loop checks every 2 us: running blocks leave within one interval; blocks that see the flag
  // at entry hold a slot for block_exit_ns.
  const Scenario looped = block_bound_scenario(Mode::kReset, 2'000);
  const ScenarioRun fast = run_scenario(looped);
  EXPECT_GE(rt_tasks_that_preempted(fast), 10);
  EXPECT_LE(longest_rt_wait(fast), looped.gpu.loop_check_ns + looped.gpu.block_exit_ns);

  // Without preemption RT kernels wait behind whole BE grids.
  EXPECT_GT(longest_rt_wait(run_scenario(block_bound_scenario(Mode::kStreams, 2'000))), 2 * block);
}

TEST(Preemption, ResetLatencyNearRtOnlyAndBelowSharedStreams) {
  Scenario s;
  s.rt_jitter = 1'500'000;
  auto run_mode = [&](Mode m) {
    s.mode = m;
    return run_scenario(s);
  };
  const ScenarioRun rt_only = run_mode(Mode::kRtOnly);
  const ScenarioRun reset = run_mode(Mode::kReset);
  const ScenarioRun wait = run_mode(Mode::kWait);
  const ScenarioRun streams = run_mode(Mode::kStreams);
  const ScenarioRun streams_prio = run_mode(Mode::kStreamsPrio);
  const DeviceTime alone = testing::rt_p50(rt_only);
  ASSERT_GT(alone, 0);
  // Reset adds the flag write and the exits of BE blocks: a few microseconds on ~200 us.
  EXPECT_LE(testing::rt_p50(reset), alone * 105 / 100);
  EXPECT_LT(testing::rt_p50(reset), testing::rt_p50(wait));  // wait lets 200 us BE blocks finish
  EXPECT_GT(testing::rt_p50(streams), 2 * testing::rt_p50(reset));
  EXPECT_GT(testing::rt_p50(streams_prio), testing::rt_p50(reset));
  // BE work still gets at least half of what it gets when nobody is preempted.
  EXPECT_GE(2 * reset.results(TaskClass::kBestEffort).size(), streams.results(TaskClass::kBestEffort).size());
  EXPECT_GT(reset.stats.preemptions, 0);
}

TEST(Preemption, RtModeEventsBracketEveryRtTask) {
  Scenario s = block_bound_scenario(Mode::kReset, 2'000);
  const ScenarioRun run = run_scenario(s);
  ASSERT_FALSE(run.events.empty());
  int64_t preempted = 0;
  for (size_t i = 0; i < run.events.size(); ++i) {
    const auto want = i % 2 == 0 ? SchedulerEvent::Kind::kRtModeEnter : SchedulerEvent::Kind::kRtModeLeave;
    EXPECT_EQ(run.events[i].kind, want) << "event " << i;
    if (i > 0) {
      EXPECT_LE(run.events[i - 1].at, run.events[i].at);
    }
    preempted += run.events[i].preempted;
  }
  EXPECT_EQ(run.events.back().kind, SchedulerEvent::Kind::kRtModeLeave);
  EXPECT_EQ(preempted, run.stats.preemptions);
  for (const TaskResult& r : run.results(TaskClass::kRealTime)) {
    bool inside = false;
    for (size_t i = 0; i + 1 < run.events.size(); i += 2) {
      inside |= run.events[i].at <= r.start && r.finish <= run.events[i + 1].at;
    }
    EXPECT_TRUE(inside) << "RT request " << r.id << " ran outside RT mode";
  }
}

// BE kernels of 64 blocks x 50 us (running ones are cut at loop points); RT arrivals every
// 0.3-0.5 ms, so BE tasks are preempted many times, mid-kernel.
Scenario numerics_scenario(Mode mode) {
  Scenario s;
  s.mode = mode;
  s.numerics = true;
  s.be_shape = {64, 50'000};
  s.rt_shape = {16, 5'000};
  s.rt_period = 300'000;
  s.rt_jitter = 200'000;
  s.rt_until = 8'000'000;
  s.be_until = 8'000'000;
  return s;
}

TEST(Preemption, ResetAndResumedTasksGiveBitIdenticalOutputs) {
  const ScenarioRun run = run_scenario(numerics_scenario(Mode::kReset));
  const auto be = run.results(TaskClass::kBestEffort);
  const auto preempted = std::count_if(be.begin(), be.end(), [](const TaskResult& r) { return r.preemptions > 0; });
  EXPECT_GE(preempted, 3);
  EXPECT_GT(run.stats.relaunched_kernels, 0);
  const auto cut = std::count_if(run.trace.begin(), run.trace.end(), [](const auto& r) { return r.cut; });
  EXPECT_GE(cut, 3);  // kernels really stopped half way, their outputs unwritten
  // RT tasks ran from work enqueued before they arrived, on the inputs staged at arrival.
  EXPECT_EQ(run.stats.armed_rt_tasks, run.stats.rt_completed);
  expect_outputs_match_unpreempted(run);
  Scenario launched = numerics_scenario(Mode::kReset);
  launched.armed_rt = false;
  const ScenarioRun unarmed = run_scenario(launched);
  EXPECT_EQ(unarmed.stats.armed_rt_tasks, 0);
  expect_outputs_match_unpreempted(unarmed);
}

// RT tasks as one launch_range each, armed and launched on arrival: the same outputs, every
// RT kernel still on the device (the simulator's default range is kernel by kernel), and no RT
// launch left to make after an armed task is released.
TEST(Preemption, RtTasksInOneLaunchGiveTheSameOutputs) {
  for (const bool armed : {true, false}) {
    SCOPED_TRACE(armed ? "armed" : "launched on arrival");
    Scenario s = numerics_scenario(Mode::kReset);
    s.armed_rt = armed;
    s.rt_single_launch = true;
    const ScenarioRun run = run_scenario(s);
    EXPECT_GE(run.stats.rt_completed, 3);
    EXPECT_EQ(run.stats.armed_rt_tasks, armed ? run.stats.rt_completed : 0);
    EXPECT_GT(run.stats.relaunched_kernels, 0);  // BE work was still cut and resumed
    expect_outputs_match_unpreempted(run);
    for (const TaskResult& r : run.results(TaskClass::kRealTime)) EXPECT_LE(r.start, r.finish);
  }
}

// A client's next task armed once its running one has ended (arm_behind_running off) instead of
// right behind it: no RT launch call is made while the client's previous task runs, still every
// RT task starts from held work, and every output is the unpreempted one. With RT requests every
// 50 us, shorter than a task, they also arrive while RT mode lasts.
TEST(Preemption, ArmingAfterTheRunningTaskEndsGivesTheSameOutputs) {
  for (const DeviceTime period : {DeviceTime{300'000}, DeviceTime{50'000}}) {
    for (const bool behind : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "period " << period << " ns, " << (behind ? "behind" : "after"));
      Scenario s = numerics_scenario(Mode::kReset);
      s.rt_period = period;
      s.rt_jitter = period / 2;
      s.arm_behind_running = behind;
      const ScenarioRun run = run_scenario(s);
      EXPECT_GE(run.stats.rt_completed, 10);
      EXPECT_EQ(run.stats.armed_rt_tasks, run.stats.rt_completed);
      EXPECT_GT(run.stats.relaunched_kernels, 0);  // BE work was still cut and resumed
      expect_outputs_match_unpreempted(run);
      // A task's first kernel issued before the kernel ahead of it on the lane ended.
      const std::vector<sim::SimLaunchRecord> rt = run.launches_of(run.rt_instance);
      int issued_while_running = 0;
      for (size_t i = 1; i < rt.size(); ++i) issued_while_running += rt[i].kernel == 0 && rt[i].issued < rt[i - 1].end;
      if (behind) {
        EXPECT_GT(issued_while_running, 0);
      } else {
        EXPECT_EQ(issued_while_running, 0);
      }
    }
  }
}

// RT arrival to the first RT kernel's start: the armed lane makes no launch call after the
// arrival, so with the same BE load its RT kernels start sooner than ones launched on arrival.
TEST(Preemption, ArmedRtStartsSoonerThanLaunchingOnArrival) {
  auto first_kernel_p50 = [](bool armed) {
    Scenario s = block_bound_scenario(Mode::kReset, 2'000);
    s.armed_rt = armed;
    const ScenarioRun run = run_scenario(s);
    std::vector<DeviceTime> waits;
    for (const TaskResult& r : run.results(TaskClass::kRealTime)) waits.push_back(r.start - r.arrival);
    EXPECT_GE(waits.size(), 15u);
    std::sort(waits.begin(), waits.end());
    return waits[waits.size() / 2];
  };
  const DeviceTime armed = first_kernel_p50(true), launched = first_kernel_p50(false);
  // Launching pays the flag write call, the upload call and the first launch's call and
  // latency (3 + 4 + 3 + 5 us here); the armed lane pays the host store's 1.5 us.
  EXPECT_LT(armed + 5'000, launched) << "armed " << armed << " ns, launched " << launched << " ns";
}

TEST(Preemption, WaitModeOutputsMatchToo) {
  const ScenarioRun run = run_scenario(numerics_scenario(Mode::kWait));
  EXPECT_GT(run.stats.preemptions, 0);
  EXPECT_EQ(run.stats.relaunched_kernels, 0);  // nothing is cut: queued kernels finish
  expect_outputs_match_unpreempted(run);
}

// Staging a BE request's inputs takes 150 us of host time here; RT requests that arrive meanwhile
// make it give up, and the BE request starts again later from the head of its queue.
TEST(Preemption, InterruptedBeStagingLosesNothing) {
  Scenario s = numerics_scenario(Mode::kReset);
  s.gpu.io_call_ns = 150'000;
  const ScenarioRun run = run_scenario(s);
  EXPECT_GT(run.stats.interrupted_stagings, 0);
  ASSERT_EQ(run.answers.size(), run.submitted.size());
  for (const auto& [id, answers] : run.answers) {
    ASSERT_EQ(answers.size(), 1u) << "request " << id;
    EXPECT_EQ(answers[0].error, nullptr) << "request " << id;
  }
  expect_outputs_match_unpreempted(run);
}

}  // namespace
}  // namespace atl::sched
