// The upload stop word's protocol (ExecDevice::upload_stop_word), in real time on HoldGateDevice:
// the scheduler and the arrival sentinel store it only after reading the completion words and
// with a flag raise behind it, and lower_flag() takes it down before BE work resumes. So every
// kernel 0 whose upload it stopped is a cut launch, run again, and no BE result is delivered
// from a stale input. The GPU side (the copy kernel reading the word) is in
// tests/gpu_sched/test_cuda_upload_stop.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "hold_gate_device.h"
#include "scenario.h"

namespace atl::sched {
namespace {

using namespace std::chrono_literals;
using testing::HoldGateDevice;

constexpr DeviceTime kUs = 1'000;

struct ResetRun {
  int64_t rt_answered = 0, be_answered = 0, failed = 0;
  bool word_seen_up = false;
};

// Reset mode, a closed-loop BE client of short kernels after a long upload (kernel 0) beside an RT
// client with `arrivals` requests 0.3-1.5 ms apart, inputs in staging so the sentinel may open.
// `meddle`: the test's own stores to the word, on another thread, against the protocol.
ResetRun run_reset(HoldGateDevice& device, bool sentinel, int arrivals, bool meddle = false) {
  const auto& rt = testing::rt_model();
  const auto& be = testing::be_model();
  const InstanceId rt_instance = device.load(rt.program, rt.weights);
  const InstanceId be_instance = device.load(be.program, be.weights);
  device.set_kernel_ns(rt_instance, 20 * kUs);
  device.set_kernel_ns(be_instance, 10 * kUs);
  device.set_upload_ns(be_instance, 200 * kUs);  // a large batch's upload, in kernel 0
  const std::vector<Tensor> rt_inputs = device.request_buffers(rt_instance);

  ResetRun run;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> be_answered{0}, failed{0};
  std::function<void()> send_be;
  SchedulerOptions o;
  o.mode = Mode::kReset;
  o.armed_rt = true;
  o.arrival_sentinel = sentinel;
  o.rt_single_launch = true;
  Scheduler scheduler(device, o);
  const ClientId rt_client = scheduler.add_client(TaskClass::kRealTime, "rt", rt_instance);
  const ClientId be_client = scheduler.add_client(TaskClass::kBestEffort, "be", be_instance);
  send_be = [&] {
    scheduler.submit(be_client, Request{}, [&](std::exception_ptr error, TaskResult) {
      if (error) ++failed;
      ++be_answered;
      if (!stopping) send_be();
    });
  };
  uint32_t* word = device.upload_stop_word();
  std::thread watcher([&] {
    while (!stopping) {
      if (std::atomic_ref<uint32_t>(*word).load() != 0) run.word_seen_up = true;
      if (meddle) store_host_word(word, 1);
      std::this_thread::sleep_for(50us);
    }
  });
  scheduler.start();
  for (int i = 0; i < 2; ++i) send_be();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<DeviceTime> gap(300 * kUs, 1500 * kUs);
  std::vector<std::future<TaskResult>> rt_results;
  DeviceTime at = device.now() + 2'000 * kUs;
  for (int i = 0; i < arrivals; ++i) {
    rt_results.push_back(scheduler.submit(rt_client, Request{rt_inputs, at, kNever}));
    at += gap(rng);
  }
  for (auto& f : rt_results) {
    if (f.wait_for(10s) != std::future_status::ready) break;
    try {
      f.get();
      ++run.rt_answered;
    } catch (...) {
      ++failed;
    }
  }
  stopping = true;
  watcher.join();
  scheduler.stop();
  run.be_answered = be_answered;
  run.failed = failed;
  return run;
}

TEST(UploadStop, ResetNeverDeliversAStaleUploadThroughEitherOpening) {
  int64_t stopped = 0;
  for (const bool sentinel : {false, true}) {
    SCOPED_TRACE(sentinel ? "arrival sentinel" : "scheduler's openings");
    HoldGateDevice device;
    device.enable_upload_stop();
    const ResetRun r = run_reset(device, sentinel, 150);
    EXPECT_EQ(r.rt_answered, 150);
    EXPECT_EQ(r.failed, 0);
    EXPECT_GT(r.be_answered, 0);
    EXPECT_TRUE(r.word_seen_up) << "no opening stored the word";
    EXPECT_EQ(device.stale_deliveries(), 0)
        << "a BE result computed on an upload the word stopped (" << device.stopped_uploads() << " stopped)";
    EXPECT_EQ(std::atomic_ref<uint32_t>(*device.upload_stop_word()).load(), 0u) << "the word outlived RT mode";
    stopped += device.stopped_uploads();
  }
  EXPECT_GT(stopped, 0) << "no arrival found an upload running: the check above had nothing to catch";
}

// The check itself: a word stored outside the protocol (no flag, no cut) stops uploads the
// scheduler counts as done, and the device sees their results delivered.
TEST(UploadStop, AWordStoredAgainstTheProtocolDeliversStaleResults) {
  HoldGateDevice device;
  device.enable_upload_stop();
  run_reset(device, false, 20, /*meddle=*/true);
  EXPECT_GT(device.stopped_uploads(), 0);
  EXPECT_GT(device.stale_deliveries(), 0);
}

}  // namespace
}  // namespace atl::sched
