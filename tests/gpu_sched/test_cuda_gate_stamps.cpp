// ATOLL_CUDA_GATE_STAMPS=1: each armed RT lane writes its hold's token to host memory past the
// hold and past the flag write, and the device times both from the store that opened the hold.
// Reset mode keeps every output exact with the extra writes, and every armed RT task that
// preempted gives a sample of each (label gpu; skips without a GPU).
#include <gtest/gtest.h>

#include <thread>

#include "../test_env.h"
#include "cuda_sched_util.h"
#include "sched/cuda_exec_device.h"
#include "sched/scheduler.h"

namespace atl::sched {
namespace {

TEST(CudaGateStamps, ResetStampsEveryArmedTaskAndKeepsOutputsExact) {
  REQUIRE_GPU();
  const test::ScopedEnv stamps("ATOLL_CUDA_GATE_STAMPS", "1");
  const uint64_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ATOLL_TEST_SEED=" << seed);
  LoadedPair pair = load_pair("resnet50", "resnet18");
  ExecDevice* device = pair.device.get();
  const std::vector<Tensor> be_inputs = seeded_inputs(pair.be_model.program, seed);
  const std::vector<Tensor> be_want = pair.reference(pair.be_inst, be_inputs);
  const std::vector<Tensor> rt_inputs = seeded_inputs(pair.rt_model.program, seed + 1);
  const std::vector<Tensor> rt_want = pair.reference(pair.rt_inst, rt_inputs);
  ASSERT_TRUE(device->take_gate_stamps().has_value()) << "the switch is on: the device stamps";

  SchedulerOptions opts;
  opts.mode = Mode::kReset;
  opts.stall_timeout_ns = static_cast<DeviceTime>(3e9 * test::slowdown());
  Scheduler s(*device, opts);
  const ClientId be = s.add_client(TaskClass::kBestEffort, "be", pair.be_inst);
  const ClientId rt = s.add_client(TaskClass::kRealTime, "rt", pair.rt_inst);
  s.start();
  std::vector<std::future<TaskResult>> be_results, rt_results;
  constexpr int kRtRequests = 20;
  for (int i = 0; i < 20; ++i) be_results.push_back(s.submit(be, Request{be_inputs, device->now(), kNever}));
  for (int i = 0; i < kRtRequests; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(700));
    rt_results.push_back(s.submit(rt, Request{rt_inputs, device->now(), kNever}));
  }
  for (auto& f : rt_results) {
    ASSERT_EQ(f.wait_for(test::hang_limit(std::chrono::seconds(20))), std::future_status::ready) << "an RT request hung";
    EXPECT_TRUE(same_bytes(f.get().outputs, rt_want));
  }
  for (auto& f : be_results) {
    ASSERT_EQ(f.wait_for(test::hang_limit(std::chrono::seconds(20))), std::future_status::ready) << "a BE request hung";
    EXPECT_TRUE(same_bytes(f.get().outputs, be_want));
  }
  s.stop();
  ASSERT_EQ(s.stats().armed_rt_tasks, kRtRequests) << "RT tasks launched on arrival have no holds to stamp";
  const std::optional<GateStamps> got = device->take_gate_stamps();
  ASSERT_TRUE(got.has_value());
  // Two holds per armed task, each passed once opened; one flag write per armed task (the next
  // task, armed behind the last, may have been released by the stop).
  EXPECT_GE(got->passed_us.size(), static_cast<size_t>(kRtRequests));
  EXPECT_GT(got->flag_us.size(), 0u);
  EXPECT_LE(got->flag_us.size(), static_cast<size_t>(kRtRequests) + 1);
  for (const double us : got->passed_us) EXPECT_GE(us, 0.0);
  for (const double us : got->flag_us) EXPECT_GE(us, 0.0);
  EXPECT_TRUE(same_bytes(pair.reference(pair.be_inst, be_inputs), be_want)) << "the flag was left up";
}

TEST(CudaGateStamps, OffByDefault) {
  REQUIRE_GPU();
  const test::ScopedEnv stamps("ATOLL_CUDA_GATE_STAMPS", "0");
  EXPECT_FALSE(make_cuda_exec_device()->take_gate_stamps().has_value());
}

}  // namespace
}  // namespace atl::sched
