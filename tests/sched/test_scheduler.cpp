// The scheduler on the simulated GPU: every mode answers every request once, BE work always
// completes, the in-flight cap holds, runs repeat exactly, and bad requests fail alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "scenario.h"

namespace atl::sched {
namespace {

using testing::Answer;
using testing::Scenario;
using testing::ScenarioRun;

class EveryMode : public ::testing::TestWithParam<Mode> {};

TEST_P(EveryMode, AnswersEveryRequestExactlyOnce) {
  Scenario s;
  s.mode = GetParam();
  s.rt_jitter = 1'500'000;
  const ScenarioRun run = run_scenario(s);

  ASSERT_EQ(run.answers.size(), run.submitted.size());  // nothing lost, nothing invented
  int rt_submitted = 0, be_submitted = 0;
  for (uint64_t id : run.submitted) {
    const auto it = run.answers.find(id);
    ASSERT_NE(it, run.answers.end()) << "request " << id << " was never answered";
    ASSERT_EQ(it->second.size(), 1u) << "request " << id << " was answered " << it->second.size() << " times";
    const Answer& a = it->second[0];
    (a.result.task_class == TaskClass::kRealTime ? rt_submitted : be_submitted)++;
    if (s.mode == Mode::kRtOnly && a.result.task_class == TaskClass::kBestEffort) {
      ASSERT_NE(a.error, nullptr);  // rt-only refuses BE work
      try {
        std::rethrow_exception(a.error);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      }
      continue;
    }
    ASSERT_EQ(a.error, nullptr) << "request " << id << " failed";
    EXPECT_LE(a.result.arrival, a.result.start);
    EXPECT_LT(a.result.start, a.result.finish);
  }
  EXPECT_EQ(rt_submitted, 10);
  const auto rt = run.results(TaskClass::kRealTime);
  const auto be = run.results(TaskClass::kBestEffort);
  EXPECT_EQ(static_cast<int>(rt.size()), rt_submitted);
  EXPECT_EQ(run.stats.rt_completed, rt_submitted);
  EXPECT_EQ(run.stats.be_completed, static_cast<int64_t>(be.size()));
  if (s.mode == Mode::kRtOnly) {
    EXPECT_TRUE(be.empty());
    EXPECT_EQ(run.stats.failed, be_submitted);
  } else {
    EXPECT_EQ(static_cast<int>(be.size()), be_submitted);
    EXPECT_GE(be.size(), 4u);  // both BE clients made progress next to the RT load
    EXPECT_EQ(run.stats.failed, 0);
  }
}

class ModesWithBe : public ::testing::TestWithParam<Mode> {};

TEST_P(ModesWithBe, BeTasksFinishOnceRtLoadStops) {
  // RT work nearly saturates the device for 10 ms: 8 kernels of 100 us every 0.9 ms.
  Scenario s;
  s.mode = GetParam();
  s.rt_shape = {264, 100'000};
  s.rt_period = 900'000;
  s.rt_until = 10'000'000;
  s.be_until = 10'000'000;
  const ScenarioRun run = run_scenario(s);

  const auto be = run.results(TaskClass::kBestEffort);
  ASSERT_EQ(be.size() + run.results(TaskClass::kRealTime).size(), run.submitted.size());
  EXPECT_EQ(run.stats.failed, 0);
  // Each closed-loop client had a request outstanding when the load stopped; it finished.
  const auto finished_after =
      std::count_if(be.begin(), be.end(), [&](const TaskResult& r) { return r.finish > s.be_until; });
  EXPECT_EQ(finished_after, s.be_clients);
}

std::string param_name(const ::testing::TestParamInfo<Mode>& info) {
  std::string name = mode_name(info.param);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Modes, EveryMode, ::testing::ValuesIn(all_modes()), param_name);
INSTANTIATE_TEST_SUITE_P(Modes, ModesWithBe,
                         ::testing::Values(Mode::kSeq, Mode::kStreams, Mode::kStreamsPrio, Mode::kWait, Mode::kReset),
                         param_name);

// Largest number of one instance's launches on the device at one instant (issued, not ended).
// The most launches issued and not ended at once, from `from` on.
int64_t max_in_flight(const std::vector<sim::SimLaunchRecord>& launches, DeviceTime from = 0) {
  std::vector<std::pair<DeviceTime, int>> edges;
  for (const auto& r : launches) {
    edges.emplace_back(r.issued, +1);
    edges.emplace_back(r.end, -1);
  }
  std::sort(edges.begin(), edges.end());  // at equal times an end (-1) sorts before an issue
  int64_t now = 0, most = 0;
  for (const auto& [t, d] : edges) {
    now += d;
    if (t >= from) most = std::max(most, now);
  }
  return most;
}

TEST(Scheduler, BeInFlightCapHoldsInEveryMode) {
  for (const Mode mode : {Mode::kReset, Mode::kWait, Mode::kStreams, Mode::kSeq}) {
    for (const int cap : {1, 2, 4}) {
      Scenario s;
      s.mode = mode;
      s.inflight_cap = cap;
      s.rt_jitter = 1'000'000;
      s.rt_until = 8'000'000;
      s.be_until = 8'000'000;
      s.be_shape = {8, 20'000};  // short kernels: the window refills often
      const ScenarioRun run = run_scenario(s);
      for (InstanceId be : run.be_instances) {
        const auto launches = run.launches_of(be);
        ASSERT_FALSE(launches.empty());
        EXPECT_EQ(max_in_flight(launches), cap) << mode_name(mode) << " cap " << cap;
      }
    }
  }
}

// SchedulerOptions::be_queue_ns: once a BE lane has timed its kernels, long ones queue one behind
// the running one, short ones still fill the cap; off, every lane fills it.
TEST(Scheduler, BeQueueTimeQueuesFewerLongKernels) {
  // seq: one lane every client shares, the DISB warm-up's mode (it once read a client -1 there).
  for (const Mode mode : {Mode::kReset, Mode::kStreams, Mode::kSeq}) {
    for (const DeviceTime queue_ns : {DeviceTime{0}, DeviceTime{100'000}}) {
      for (const DeviceTime kernel_ns : {DeviceTime{400'000}, DeviceTime{20'000}}) {
        Scenario s;
        s.mode = mode;
        s.inflight_cap = 4;
        s.be_queue_ns = queue_ns;
        s.rt_until = 8'000'000;
        s.be_until = 8'000'000;
        s.be_shape = {8, kernel_ns};  // a few blocks: each kernel takes its block time
        const ScenarioRun run = run_scenario(s);
        const int64_t want = queue_ns > 0 && kernel_ns > queue_ns ? 2 : 4;
        for (InstanceId be : run.be_instances) {
          const auto launches = run.launches_of(be);
          ASSERT_FALSE(launches.empty());
          EXPECT_EQ(max_in_flight(launches, 3'000'000), want)
              << mode_name(mode) << ", queue " << queue_ns << " ns, kernels " << kernel_ns << " ns";
        }
      }
    }
  }
}

TEST(Scheduler, SameSeedSameTimeline) {
  Scenario s;
  s.rt_jitter = 1'900'000;
  s.be_shape = {300, 50'000};
  const ScenarioRun a = run_scenario(s);
  const ScenarioRun b = run_scenario(s);
  ASSERT_FALSE(a.trace.empty());
  EXPECT_EQ(a.trace, b.trace);
  const auto ra = a.results(TaskClass::kRealTime), rb = b.results(TaskClass::kRealTime);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].arrival, rb[i].arrival);
    EXPECT_EQ(ra[i].start, rb[i].start);
    EXPECT_EQ(ra[i].finish, rb[i].finish);
  }
  s.seed = 2;  // other arrivals: the comparison above can tell timelines apart
  EXPECT_NE(run_scenario(s).trace, a.trace);
}

// One RT task occupies the device while two more wait: A arrives first with a late deadline,
// B second with an early one.
std::pair<DeviceTime, DeviceTime> start_of_a_and_b(RtOrder order) {
  SimExecDevice device;
  const auto& m = testing::rt_model();
  SchedulerOptions so;
  so.rt_order = order;
  Scheduler scheduler(device, so);
  const ClientId c0 = scheduler.add_client(TaskClass::kRealTime, "rt0", device.load(m.program, m.weights));
  const ClientId c1 = scheduler.add_client(TaskClass::kRealTime, "rt1", device.load(m.program, m.weights));
  const auto inputs = testing::random_inputs(m.program, 3);
  scheduler.submit(c0, Request{inputs, 0, kNever});
  auto a = scheduler.submit(c0, Request{inputs, 1000, 10'000'000});
  auto b = scheduler.submit(c1, Request{inputs, 2000, 1'000'000});
  scheduler.run_until_idle();
  return {a.get().start, b.get().start};
}

TEST(Scheduler, RtQueueServesArrivalOrderOrEarliestDeadline) {
  const auto [a_fifo, b_fifo] = start_of_a_and_b(RtOrder::kArrival);
  EXPECT_LT(a_fifo, b_fifo);
  const auto [a_edf, b_edf] = start_of_a_and_b(RtOrder::kDeadline);
  EXPECT_LT(b_edf, a_edf);
}

TEST(Scheduler, BadRequestFailsAloneAndOthersComplete) {
  SimExecOptions o;
  o.numerics = true;
  SimExecDevice device(o);
  const auto& m = testing::be_model();
  Scheduler scheduler(device);
  const ClientId be = scheduler.add_client(TaskClass::kBestEffort, "be", device.load(m.program, m.weights));
  auto good1 = scheduler.submit(be, Request{testing::random_inputs(m.program, 1)});
  auto bad = scheduler.submit(be, Request{{Tensor(DType::kF32, Shape{1, 3, 8, 8})}});
  auto good2 = scheduler.submit(be, Request{testing::random_inputs(m.program, 2)});
  scheduler.run_until_idle();
  EXPECT_EQ(good1.get().outputs.size(), 1u);
  try {
    bad.get();
    ADD_FAILURE() << "a request with a wrong input shape succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("input"), std::string::npos) << e.message();
  }
  EXPECT_EQ(good2.get().outputs.size(), 1u);
  EXPECT_EQ(scheduler.stats().failed, 1);
}

// reset mode holds each RT client's next task on the device: a bad RT request still fails
// alone, and the held work behind it stays in step for the next request.
TEST(Scheduler, BadRtRequestFailsAloneWhenArmed) {
  SimExecOptions o;
  o.numerics = true;
  SimExecDevice device(o);
  const auto& m = testing::rt_model();
  Scheduler scheduler(device);
  ASSERT_TRUE(scheduler.options().armed_rt);
  const ClientId rt = scheduler.add_client(TaskClass::kRealTime, "rt", device.load(m.program, m.weights));
  const std::vector<Tensor> inputs = testing::random_inputs(m.program, 3);
  auto good1 = scheduler.submit(rt, Request{testing::random_inputs(m.program, 1)});
  auto bad = scheduler.submit(rt, Request{{Tensor(DType::kF32, Shape{1, 3, 8, 8})}});
  auto good2 = scheduler.submit(rt, Request{inputs});
  scheduler.run_until_idle();
  EXPECT_EQ(good1.get().outputs.size(), 1u);
  EXPECT_THROW(bad.get(), Error);
  const std::vector<Tensor> out = good2.get().outputs;
  auto ref = make_cpu_backend()->load(m.program, m.weights);
  ref->set_input(0, inputs[0]);
  ref->run();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::memcmp(out[0].raw(), ref->get_output(0).raw(), out[0].nbytes()), 0);
  EXPECT_EQ(scheduler.stats().failed, 1);
  EXPECT_EQ(scheduler.stats().armed_rt_tasks, 3);
}

// Held work must not outlive its scheduler: the device would wait on it forever.
TEST(Scheduler, DestroyingReleasesHeldWorkAndLowersTheFlag) {
  SimExecDevice device;
  const auto& m = testing::rt_model();
  const InstanceId inst = device.load(m.program, m.weights);
  for (int round = 0; round < 2; ++round) {
    Scheduler scheduler(device);
    const ClientId rt = scheduler.add_client(TaskClass::kRealTime, "rt", inst);
    auto f = scheduler.submit(rt, Request{testing::random_inputs(m.program, round)});
    scheduler.run_until_idle();
    EXPECT_NO_THROW(f.get());
    EXPECT_TRUE(device.gpu().busy());  // the next task waits, held
  }
  EXPECT_FALSE(device.gpu().busy());
  EXPECT_FALSE(device.gpu().flag());
}

TEST(Scheduler, RejectsBadClientsAndOptions) {
  SimExecDevice device;
  const auto& m = testing::rt_model();
  const InstanceId inst = device.load(m.program, m.weights);
  Scheduler scheduler(device);
  const ClientId c = scheduler.add_client(TaskClass::kRealTime, "rt", inst);
  EXPECT_THROW(scheduler.add_client(TaskClass::kBestEffort, "again", inst), Error);  // instances are not shared
  EXPECT_THROW(scheduler.submit(c + 5, Request{}), Error);
  SchedulerOptions bad;
  bad.inflight_cap = 0;
  EXPECT_THROW(Scheduler refused(device, bad), Error);
  EXPECT_THROW(mode_from_name("preempt"), Error);
  for (const Mode mode : all_modes()) EXPECT_EQ(mode_from_name(mode_name(mode)), mode);
}

TEST(Scheduler, RunsOnItsOwnThread) {
  SimExecOptions o;
  o.numerics = true;
  SimExecDevice device(o);
  const auto& rt = testing::rt_model();
  const auto& be = testing::be_model();
  Scheduler scheduler(device);
  const ClientId rc = scheduler.add_client(TaskClass::kRealTime, "rt", device.load(rt.program, rt.weights));
  const ClientId bc = scheduler.add_client(TaskClass::kBestEffort, "be", device.load(be.program, be.weights));
  scheduler.start();
  std::vector<std::future<TaskResult>> futures;
  for (int i = 0; i < 3; ++i) {
    futures.push_back(scheduler.submit(bc, Request{testing::random_inputs(be.program, 10 + i)}));
    futures.push_back(scheduler.submit(rc, Request{testing::random_inputs(rt.program, 20 + i)}));
  }
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    EXPECT_EQ(f.get().outputs.size(), 1u);
  }
  scheduler.stop();
  EXPECT_EQ(scheduler.stats().rt_completed, 3);
  EXPECT_EQ(scheduler.stats().be_completed, 3);
}

TEST(Scheduler, DestroyingAnswersWhatIsPending) {
  SimExecDevice device;
  const auto& m = testing::be_model();
  std::future<TaskResult> pending;
  {
    Scheduler scheduler(device);
    const ClientId c = scheduler.add_client(TaskClass::kBestEffort, "be", device.load(m.program, m.weights));
    pending = scheduler.submit(c, Request{testing::random_inputs(m.program, 1), 1'000'000'000, kNever});
  }
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_THROW(pending.get(), Error);
}

}  // namespace
}  // namespace atl::sched

namespace atl::sched {
namespace {

// An armed task holds only its first kernels; the rest are launched when it starts. An RT model
// longer than that, in every mode that arms: each answer matches the CPU reference, a bad request
// in between fails alone, and every task started from armed work.
class ArmingModes : public ::testing::TestWithParam<Mode> {};

TEST_P(ArmingModes, LongRtTasksRunWholeFromArmedWork) {
  SimExecOptions o;
  o.numerics = true;
  SimExecDevice device(o);
  const auto& m = testing::be_model();  // the longer tiny model, as an RT client here
  SchedulerOptions so;
  so.mode = GetParam();
  so.armed_kernels = 3;
  ASSERT_GT(m.program.kernels.size(), 3u) << "the model must be longer than what an armed lane holds";
  Scheduler scheduler(device, so);
  const ClientId rt = scheduler.add_client(TaskClass::kRealTime, "rt", device.load(m.program, m.weights));
  auto ref = make_cpu_backend()->load(m.program, m.weights);
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::future<TaskResult>> answers;
  for (int i = 0; i < 4; ++i) {
    if (i == 2) answers.push_back(scheduler.submit(rt, Request{{Tensor(DType::kF32, Shape{1, 3, 8, 8})}}));
    inputs.push_back(testing::random_inputs(m.program, 10 + static_cast<uint64_t>(i)));
    answers.push_back(scheduler.submit(rt, Request{inputs.back(), 100'000 * i, kNever}));
  }
  scheduler.run_until_idle();
  size_t next_input = 0;
  for (size_t a = 0; a < answers.size(); ++a) {
    if (a == 2) {
      EXPECT_THROW(answers[a].get(), Error);
      continue;
    }
    const std::vector<Tensor> out = answers[a].get().outputs;
    ref->set_input(0, inputs[next_input++][0]);
    ref->run();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(std::memcmp(out[0].raw(), ref->get_output(0).raw(), out[0].nbytes()), 0) << "answer " << a;
  }
  EXPECT_TRUE(scheduler.arms_rt());
  EXPECT_EQ(scheduler.stats().armed_rt_tasks, 5);
  EXPECT_EQ(scheduler.stats().failed, 1);
}

INSTANTIATE_TEST_SUITE_P(Modes, ArmingModes,
                         ::testing::Values(Mode::kRtOnly, Mode::kStreams, Mode::kStreamsPrio, Mode::kWait,
                                           Mode::kReset),
                         [](const auto& info) {
                           std::string n = mode_name(info.param);
                           std::erase(n, '-');
                           return n;
                         });

}  // namespace
}  // namespace atl::sched

namespace atl::sched {
namespace {

// A device whose launches never end while its clock runs on: the scheduler must fail every
// request with what it waits on once stall_timeout_ns has passed, not poll forever.
class NeverEndingDevice final : public ExecDevice {
 public:
  std::string name() const override { return "never-ending"; }
  std::string description() const override { return inner_.description(); }
  CompileTarget target() const override { return inner_.target(); }
  InstanceId load(const Program& p, const WeightStore& w) override { return inner_.load(p, w); }
  const Program& program(InstanceId i) const override { return inner_.program(i); }
  using ExecDevice::write_inputs;
  bool write_inputs(InstanceId i, StreamId s, std::span<const Tensor> in, const std::function<bool()>& y) override {
    return inner_.write_inputs(i, s, in, y);
  }
  std::vector<Tensor> read_outputs(InstanceId i, StreamId s) override { return inner_.read_outputs(i, s); }
  StreamId create_stream(StreamPriority p) override { return inner_.create_stream(p); }
  uint64_t launch(StreamId s, InstanceId i, int k, const LaunchOptions& o) override {
    return inner_.launch(s, i, k, o);
  }
  uint64_t completed(StreamId) override { return 0; }
  std::optional<LaunchSpan> launch_span(StreamId, uint64_t) override { return std::nullopt; }
  std::exception_ptr take_error(StreamId s) override { return inner_.take_error(s); }
  void raise_flag(StreamId s) override { inner_.raise_flag(s); }
  void lower_flag() override { inner_.lower_flag(); }
  DeviceTime now() override { return clock_; }
  void wait_until(DeviceTime deadline) override { clock_ = std::min(deadline, clock_ + 1'000'000); }
  void synchronize(StreamId s) override { inner_.synchronize(s); }

 private:
  SimExecDevice inner_;
  DeviceTime clock_ = 0;
};

TEST(Scheduler, StalledDeviceFailsTheRunNamingWhatItWaitsOn) {
  NeverEndingDevice device;
  const auto& m = testing::be_model();
  SchedulerOptions so;
  so.stall_timeout_ns = 50'000'000;
  Scheduler scheduler(device, so);
  const ClientId be = scheduler.add_client(TaskClass::kBestEffort, "be-stuck", device.load(m.program, m.weights));
  auto answer = scheduler.submit(be, Request{testing::random_inputs(m.program, 1)});
  try {
    scheduler.run_until_idle();
    ADD_FAILURE() << "a run whose launches never end returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(e.message().find("no progress"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("be-stuck"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("launches in flight"), std::string::npos) << e.message();
  }
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "the request was left unanswered";
  EXPECT_THROW(answer.get(), Error);
}

}  // namespace
}  // namespace atl::sched

namespace atl::sched {
namespace {

TEST(PollStats, KeepsTheLongestStepAndItsLongestPhase) {
  PollStats s;
  s.add({1000, 2000, 3000, 0});
  s.add({40'000, 20'000, 5'000, 1'000});  // 66 us, mostly admission
  s.add({0, 0, 30'000, 0});
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.over_50us, 1);
  EXPECT_EQ(s.longest_ns, 66'000);
  EXPECT_EQ(s.longest_phase, PollPhase::kAdmit);
  EXPECT_STREQ(poll_phase_name(s.longest_phase), "admit");
  EXPECT_STREQ(poll_phase_name(PollPhase::kArm), "arm");
}

}  // namespace
}  // namespace atl::sched
