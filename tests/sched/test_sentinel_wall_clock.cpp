// The arrival sentinel against the scheduler's own thread, in real time on HoldGateDevice (the
// simulated device has no gate words, so the sentinel never opens a lane there). Out of RT mode
// the openers are published before the BE lanes are fed: an RT request that arrives while a BE
// launch call blocks the scheduler's thread is opened by the sentinel at its arrival. Published
// only after the BE launches, it waited for that call to return (DISB E on the H200: up to 2 ms).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "hold_gate_device.h"
#include "scenario.h"

namespace atl::sched {
namespace {

using namespace std::chrono_literals;
using testing::HoldGateDevice;

constexpr DeviceTime kMs = 1'000'000;

DeviceTime span_of(const LaunchSpan& s) {
  return s.end - s.start;
}

// ---- the device itself ----

// The BE test model loaded on `device`, each kernel 1 ms.
InstanceId load_be_model(HoldGateDevice& device) {
  const auto& m = testing::be_model();
  const InstanceId inst = device.load(m.program, m.weights);
  device.set_kernel_ns(inst, kMs);
  return inst;
}

TEST(HoldGateDevice, HeldWorkRunsOnceAnotherThreadRaisesItsGateWord) {
  HoldGateDevice device;
  const InstanceId inst = load_be_model(device);
  const StreamId s = device.create_stream(StreamPriority::kHigh);
  device.hold(s);
  EXPECT_EQ(device.launch(s, inst, 0, LaunchOptions{}), 1u);
  const std::optional<GateOpener> opener = device.gate_opener(s, 1);
  ASSERT_TRUE(opener.has_value());
  EXPECT_FALSE(device.gate_opener(s, 2).has_value());  // only one hold is pending

  std::this_thread::sleep_for(3ms);
  EXPECT_EQ(device.completed(s), 0u) << "held work ran";
  const DeviceTime opened = device.now();
  std::thread([&] { opener->open(); }).join();
  while (device.completed(s) == 0 && device.now() < opened + 1000 * kMs) device.wait_until(device.now() + kMs);
  ASSERT_EQ(device.completed(s), 1u);
  EXPECT_EQ(device.completion_word(s), 1u);
  const std::optional<LaunchSpan> span = device.launch_span(s, 1);
  ASSERT_TRUE(span.has_value());
  EXPECT_GE(span->start, opened);
  EXPECT_EQ(span_of(*span), kMs);
  device.release(s);  // the scheduler's own release follows the opener's and changes nothing
  EXPECT_EQ(device.completed(s), 1u);
  device.synchronize(s);
}

TEST(HoldGateDevice, PreemptibleKernelsStartingUnderTheFlagExitAtOnce) {
  HoldGateDevice device;
  const InstanceId inst = load_be_model(device);
  const StreamId be = device.create_stream(StreamPriority::kLow);
  const StreamId rt = device.create_stream(StreamPriority::kHigh);
  LaunchOptions preemptible;
  preemptible.preemptible = true;

  device.hold(rt);
  device.raise_flag(rt);  // behind the hold: the flag stays down until it opens
  device.launch(be, inst, 0, preemptible);
  device.synchronize(be);
  EXPECT_EQ(span_of(*device.launch_span(be, 1)), kMs);

  device.release(rt);
  device.launch(be, inst, 0, preemptible);
  device.launch(be, inst, 0, LaunchOptions{});  // not preemptible: runs its time
  device.synchronize(be);
  EXPECT_EQ(span_of(*device.launch_span(be, 2)), 0);
  EXPECT_EQ(span_of(*device.launch_span(be, 3)), kMs);

  device.lower_flag();
  device.launch(be, inst, 0, preemptible);
  device.synchronize(be);
  EXPECT_EQ(span_of(*device.launch_span(be, 4)), kMs);
}

// ---- the scheduler ----

constexpr DeviceTime kRtKernelNs = 100'000;
constexpr DeviceTime kBeKernelNs = kMs;
constexpr DeviceTime kFirstRtLead = 20 * kMs;  // RT request 1 arrives this long after the start
// The BE launch call after RT mode blocks the scheduler's thread this long; RT request 2 arrives
// this far into it. Milliseconds either side, for a loaded 2-core machine.
constexpr auto kBlockedLaunch = 40ms;
constexpr DeviceTime kSecondRtIntoBlock = 5 * kMs;
constexpr DeviceTime kSentinelReaction = 20 * kMs;  // the longest arrival -> admitted allowed

TEST(SentinelWallClock, OpensTheLaneForAnArrivalWhileABeLaunchBlocksTheScheduler) {
  HoldGateDevice device;
  const auto& rt = testing::rt_model();
  const auto& be = testing::be_model();
  const InstanceId rt_instance = device.load(rt.program, rt.weights);
  const InstanceId be_instance = device.load(be.program, be.weights);
  device.set_kernel_ns(rt_instance, kRtKernelNs);
  device.set_kernel_ns(be_instance, kBeKernelNs);
  // The sentinel expects only requests whose inputs lie in staging.
  const std::vector<Tensor> rt_inputs = device.request_buffers(rt_instance);

  // Declared before the scheduler: its callbacks use them until it is gone.
  std::promise<testing::Answer> second;
  std::atomic<bool> stopping{false};
  std::function<void()> send_be;

  SchedulerOptions o;
  o.mode = Mode::kReset;
  o.armed_rt = true;
  o.arrival_sentinel = true;
  o.rt_single_launch = true;
  Scheduler scheduler(device, o);
  const ClientId rt_client = scheduler.add_client(TaskClass::kRealTime, "rt", rt_instance);
  const ClientId be_client = scheduler.add_client(TaskClass::kBestEffort, "be", be_instance);

  // RT request 2 is submitted from inside the blocked launch call (on the scheduler's thread,
  // as completion callbacks submit), ahead of its arrival so the sentinel expects it.
  device.block_first_be_launch_after_lower(kBlockedLaunch, [&] {
    scheduler.submit(rt_client, Request{rt_inputs, device.now() + kSecondRtIntoBlock, kNever},
                     [&](std::exception_ptr error, TaskResult r) {
                       second.set_value({error, std::move(r)});
                     });
  });
  send_be = [&] {  // closed loop: BE work is always there to feed when RT mode ends
    scheduler.submit(be_client, Request{}, [&](std::exception_ptr error, TaskResult) {
      if (!error && !stopping) send_be();
    });
  };

  scheduler.start();
  send_be();
  std::future<TaskResult> first = scheduler.submit(rt_client, Request{rt_inputs, device.now() + kFirstRtLead, kNever});
  std::future<testing::Answer> second_answer = second.get_future();
  const bool first_ready = first.wait_for(5s) == std::future_status::ready;
  const bool second_ready = first_ready && second_answer.wait_for(5s) == std::future_status::ready;
  stopping = true;
  scheduler.stop();

  ASSERT_TRUE(first_ready) << "RT request 1 was not answered";
  EXPECT_NO_THROW(first.get());
  ASSERT_NE(device.block_returned_at(), -1) << "no BE launch followed RT request 1";
  ASSERT_TRUE(second_ready) << "RT request 2 was not answered";
  const testing::Answer a = second_answer.get();
  ASSERT_FALSE(a.error);
  const TaskResult& r = a.result;
  const DeviceTime blocked_until = device.block_returned_at() - r.arrival;
  SCOPED_TRACE(::testing::Message() << "RT request 2, from its arrival: admitted at " << (r.admitted - r.arrival)
                                    << " ns, the blocked launch call returned at " << blocked_until << " ns");
  EXPECT_TRUE(r.by_sentinel) << "the scheduler's thread admitted it, not the sentinel";
  EXPECT_GE(r.admitted, r.arrival);
  EXPECT_LT(r.admitted, device.block_returned_at()) << "it waited for the blocked launch call";
  EXPECT_LT(r.admitted - r.arrival, kSentinelReaction);
  EXPECT_GE(scheduler.stats().sentinel_rt_tasks, 1);
}

}  // namespace
}  // namespace atl::sched
