// The upload stop word (ATOLL_CUDA_UPLOAD_STOP=1): BE uploads running as flagged SM copies also
// read a host word, which the scheduler stores when it opens an RT lane that raises the flag, so
// their PCIe reads end before the GPU polls the gate. A stopped upload is a cut launch, run again:
// every BE and RT output stays exact, through the scheduler's own openings and the arrival
// sentinel's, and the word is down once the scheduler is (label gpu; skips without a GPU).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "../test_env.h"
#include "cuda_sched_util.h"
#include "runtime/model_source.h"
#include "sched/cuda_exec_device.h"
#include "sched/scheduler.h"

namespace atl::sched {
namespace {

struct UploadStopRig {
  const test::ScopedEnv stop{"ATOLL_CUDA_UPLOAD_STOP", "1"};
  std::unique_ptr<ExecDevice> device = make_cuda_exec_device();
  // Batch 8: a 4.8 MB upload, long enough that arrivals land inside it.
  CompiledModel be_model = compile_zoo_model({.name = "resnet50", .batch = 8, .seed = 1}, device->target(), true);
  CompiledModel rt_model = compile_zoo_model({.name = "resnet18", .seed = 2}, device->target(), true);
  InstanceId be_inst = device->load(be_model.program, be_model.weights);
  StreamId ref_stream = device->create_stream(StreamPriority::kLow);
  std::vector<Tensor> reference(InstanceId inst, const std::vector<Tensor>& inputs) {
    device->write_inputs(inst, ref_stream, inputs);
    return run_to_end(*device, ref_stream, inst, 0);
  }
};

// Without the scheduler: a word left up stops a flagged upload (the run computes on what the
// device held before), and lowering the flag takes it down. So the kernel reads the word.
TEST(CudaUploadStop, AWordLeftUpCutsTheUploadAndLoweringTheFlagClearsIt) {
  REQUIRE_GPU();
  UploadStopRig rig;
  ExecDevice& device = *rig.device;
  uint32_t* word = device.upload_stop_word();
  ASSERT_NE(word, nullptr) << "ATOLL_CUDA_UPLOAD_STOP=1 made no word";
  const uint64_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ATOLL_TEST_SEED=" << seed);
  const std::vector<Tensor> first = seeded_inputs(rig.be_model.program, seed);
  const std::vector<Tensor> second = seeded_inputs(rig.be_model.program, seed + 1);
  const std::vector<Tensor> want_first = rig.reference(rig.be_inst, first);
  device.set_uploads_with_first_kernel(rig.be_inst, true);
  const std::vector<Tensor> want_second = rig.reference(rig.be_inst, second);
  ASSERT_FALSE(same_bytes(want_first, want_second));

  device.write_inputs(rig.be_inst, rig.ref_stream, first);
  store_host_word(word, 1);
  EXPECT_FALSE(same_bytes(run_to_end(device, rig.ref_stream, rig.be_inst, 0), want_first))
      << "the upload ran whole with the stop word up";
  device.lower_flag();
  EXPECT_EQ(std::atomic_ref<uint32_t>(*word).load(), 0u);
  EXPECT_TRUE(same_bytes(run_to_end(device, rig.ref_stream, rig.be_inst, 0), want_first));
}

// Reset mode with the scheduler opening RT lanes itself, then with the arrival sentinel opening
// them at their arrivals: every output exact, preemptions made, the word down afterwards.
TEST(CudaUploadStop, ResetKeepsEveryOutputExactThroughBothOpenings) {
  REQUIRE_GPU();
  UploadStopRig rig;
  ExecDevice& device = *rig.device;
  ASSERT_NE(device.upload_stop_word(), nullptr);
  const uint64_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ATOLL_TEST_SEED=" << seed);
  const std::vector<Tensor> be_inputs = seeded_inputs(rig.be_model.program, seed);
  const std::vector<Tensor> be_want = rig.reference(rig.be_inst, be_inputs);
  device.set_uploads_with_first_kernel(rig.be_inst, true);
  const InstanceId rt_inst = device.load(rig.rt_model.program, rig.rt_model.weights);
  const std::vector<Tensor> rt_inputs = seeded_inputs(rig.rt_model.program, seed + 1);
  const std::vector<Tensor> rt_want = rig.reference(rt_inst, rt_inputs);
  std::vector<Tensor> rt_buffers = device.request_buffers(rt_inst);
  ASSERT_EQ(rt_buffers.size(), rt_inputs.size());
  for (size_t k = 0; k < rt_inputs.size(); ++k) std::memcpy(rt_buffers[k].raw(), rt_inputs[k].raw(), rt_inputs[k].nbytes());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<DeviceTime> gap(200'000, 1'200'000);

  for (const bool sentinel : {false, true}) {
    SCOPED_TRACE(sentinel ? "arrival sentinel" : "scheduler's openings");
    SchedulerOptions opts;
    opts.mode = Mode::kReset;
    opts.arrival_sentinel = sentinel;
    opts.stall_timeout_ns = static_cast<DeviceTime>(3e9 * test::slowdown());
    Scheduler s(device, opts);
    const ClientId be = s.add_client(TaskClass::kBestEffort, "be", rig.be_inst);
    const ClientId rt = s.add_client(TaskClass::kRealTime, "rt", rt_inst);
    s.start();
    std::vector<std::future<TaskResult>> be_results, rt_results;
    for (int i = 0; i < 16; ++i) be_results.push_back(s.submit(be, Request{be_inputs, device.now(), kNever}));
    DeviceTime at = device.now() + 2'000'000;
    for (int i = 0; i < 24; ++i) {
      if (sentinel) {
        rt_results.push_back(s.submit(rt, Request{rt_buffers, at, kNever}));
        at += gap(rng);
      } else {
        std::this_thread::sleep_for(std::chrono::nanoseconds(gap(rng)));
        rt_results.push_back(s.submit(rt, Request{rt_inputs, device.now(), kNever}));
      }
    }
    for (auto& f : rt_results) {
      ASSERT_EQ(f.wait_for(test::hang_limit(std::chrono::seconds(20))), std::future_status::ready)
          << "an RT request hung";
      EXPECT_TRUE(same_bytes(f.get().outputs, rt_want));
    }
    for (auto& f : be_results) {
      ASSERT_EQ(f.wait_for(test::hang_limit(std::chrono::seconds(20))), std::future_status::ready)
          << "a BE request hung";
      EXPECT_TRUE(same_bytes(f.get().outputs, be_want));
    }
    s.stop();
    EXPECT_GT(s.stats().preemptions, 0) << "no RT request preempted BE work";
    if (sentinel) {
      EXPECT_GT(s.stats().sentinel_rt_tasks, 0) << "the sentinel opened no lane";
    }
    EXPECT_EQ(std::atomic_ref<uint32_t>(*device.upload_stop_word()).load(), 0u) << "the word outlived the scheduler";
  }
}

}  // namespace
}  // namespace atl::sched
