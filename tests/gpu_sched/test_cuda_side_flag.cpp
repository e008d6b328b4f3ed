// The side flag (ATOLL_CUDA_SIDE_FLAG=1): the preemption flag written by a second stream that
// waits for the same gate as the RT lane, so that the lane's upload does not queue behind the
// write. Reset mode with two RT clients keeps every output exact, preempts, arms every RT task,
// and leaves the flag low (label gpu; skips without a GPU).
#include <gtest/gtest.h>

#include <thread>

#include "../test_env.h"
#include "cuda_sched_util.h"
#include "runtime/model_source.h"
#include "sched/cuda_exec_device.h"
#include "sched/scheduler.h"

namespace atl::sched {
namespace {

TEST(CudaSideFlag, ResetServesExactOutputsAndLeavesTheFlagLow) {
  REQUIRE_GPU();
  const test::ScopedEnv side("ATOLL_CUDA_SIDE_FLAG", "1");
  const uint64_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ATOLL_TEST_SEED=" << seed);
  LoadedPair pair = load_pair("resnet50", "resnet18");
  ExecDevice* device = pair.device.get();
  const InstanceId be_inst = pair.be_inst;
  const InstanceId rt_inst[2] = {pair.rt_inst, device->load(pair.rt_model.program, pair.rt_model.weights)};
  const std::vector<Tensor> be_inputs = seeded_inputs(pair.be_model.program, seed);
  const std::vector<Tensor> be_want = pair.reference(be_inst, be_inputs);
  const std::vector<Tensor> rt_inputs = seeded_inputs(pair.rt_model.program, seed + 1);
  const std::vector<Tensor> rt_want = pair.reference(rt_inst[0], rt_inputs);

  SchedulerOptions opts;
  opts.mode = Mode::kReset;
  opts.stall_timeout_ns = static_cast<DeviceTime>(3e9 * test::slowdown());
  Scheduler s(*device, opts);
  const ClientId be = s.add_client(TaskClass::kBestEffort, "be", be_inst);
  const ClientId rt[2] = {s.add_client(TaskClass::kRealTime, "rt0", rt_inst[0]),
                          s.add_client(TaskClass::kRealTime, "rt1", rt_inst[1])};
  s.start();
  std::vector<std::future<TaskResult>> be_results, rt_results;
  for (int i = 0; i < 30; ++i) be_results.push_back(s.submit(be, Request{be_inputs, device->now(), kNever}));
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(700));
    rt_results.push_back(s.submit(rt[i % 2], Request{rt_inputs, device->now(), kNever}));
  }
  for (auto& f : rt_results) {
    ASSERT_EQ(f.wait_for(test::hang_limit(std::chrono::seconds(20))), std::future_status::ready)
        << "an RT request hung";
    EXPECT_TRUE(same_bytes(f.get().outputs, rt_want));
  }
  for (auto& f : be_results) {
    ASSERT_EQ(f.wait_for(test::hang_limit(std::chrono::seconds(20))), std::future_status::ready) << "a BE request hung";
    EXPECT_TRUE(same_bytes(f.get().outputs, be_want));
  }
  s.stop();
  EXPECT_GT(s.stats().preemptions, 0) << "no RT request preempted BE work";
  EXPECT_EQ(s.stats().armed_rt_tasks, 30) << "the side flag's probe fell back to launching on arrival";
  // A flag left up by a late side write would stop this run's kernels at entry.
  EXPECT_TRUE(same_bytes(pair.reference(be_inst, be_inputs), be_want));
}

TEST(CudaSideFlag, RefusesTheDoorbellBesideIt) {
  REQUIRE_GPU();
  const test::ScopedEnv side("ATOLL_CUDA_SIDE_FLAG", "1");
  const test::ScopedEnv bell("ATOLL_CUDA_DOORBELL", "1");
  try {
    make_cuda_exec_device();
    FAIL() << "made a device with both ways of raising the flag";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("ATOLL_CUDA_SIDE_FLAG"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace atl::sched
