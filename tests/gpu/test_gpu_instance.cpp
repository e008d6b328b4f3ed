// The CudaInstance interface beyond Instance: bad arguments, per-kernel timing, tuning,
// running without the preemption flag, and what memory() reports.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "../test_env.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/doorbell.h"
#include "backends/cuda/stream_gate.h"
#include "backends/cuda/stream_write.h"
#include "core/error.h"
#include "gpu_test_util.h"
#include "runtime/session.h"

namespace atl {
namespace {

SessionOptions tiny(const char* model) {
  SessionOptions o;
  o.model = model;
  o.device = "cuda";
  return o;
}

TEST(GpuInstance, RejectsBadArguments) {
  ATL_REQUIRE_GPU();
  Session s(tiny("tiny_cnn"));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  const int n = static_cast<int>(s.program().kernels.size());
  EXPECT_EQ(gputest::code_of([&] { gpu.launch(n, gpu.stream(), nullptr); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.run_range(2, 1); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.set_input(0, Tensor(DType::kF32, Shape{1, 3, 8, 8})); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.get_output(7); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.select_gemm_choice(0, 1000); }), ErrorCode::kInvalidArgument);
}

TEST(GpuInstance, TimingTuningAndFlaglessRunsAgree) {
  ATL_REQUIRE_GPU();
  Session s(tiny("tiny_cnn"));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  s.set_inputs(s.random_inputs(gputest::fresh_seed()));
  s.instance().run();
  const std::vector<Tensor> want = s.outputs();

  const std::vector<double> ms = gpu.time_kernels(3);
  ASSERT_EQ(ms.size(), s.program().kernels.size());
  for (double t : ms) EXPECT_GT(t, 0.0);

  const std::vector<GemmTuneResult> tuned = gpu.tune_gemms(2);
  EXPECT_FALSE(tuned.empty());
  for (const GemmTuneResult& r : tuned) {
    EXPECT_EQ(gpu.gemm_choice(r.kernel), r.after);
    EXPECT_LE(r.after_ms, r.before_ms);
    EXPECT_EQ(static_cast<int>(r.candidates_ms.size()), gpu.gemm_choice_count(r.kernel));
  }
  // Other tiles sum in another order: close to, not equal to, the first result.
  gpu.poison(0xFF);
  s.instance().run();
  const std::vector<Tensor> retuned = s.outputs();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(gputest::rel_l2(retuned[i], want[i]), 1e-2);

  // Without the flag the kernels compute exactly what they compute with it.
  gpu.set_preemptible(false);
  gpu.poison(0xFF);
  s.instance().run();
  const std::vector<Tensor> flagless = s.outputs();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(gputest::same_bytes(flagless[i], retuned[i]));
}

// Requests written straight into the instance's staging memory (staging_inputs) skip the host
// copy and give the bytes a copied request gives; rewriting them between runs is seen.
TEST(GpuInstance, StagingInputsAreRequestsThatNeedNoCopy) {
  ATL_REQUIRE_GPU();
  Session s(tiny("tiny_cnn"));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  const std::vector<Tensor> a = s.random_inputs(gputest::fresh_seed());
  const std::vector<Tensor> b = s.random_inputs(gputest::fresh_seed() + 1);
  auto run_on = [&](const std::vector<Tensor>& inputs) {
    gpu.poison(0xFF);
    s.set_inputs(inputs);
    s.instance().run();
    return s.outputs();
  };
  const std::vector<Tensor> want_a = run_on(a), want_b = run_on(b);

  std::vector<Tensor> staged = gpu.staging_inputs();
  ASSERT_EQ(staged.size(), a.size());
  auto write = [&](const std::vector<Tensor>& from) {
    for (size_t i = 0; i < staged.size(); ++i) {
      ASSERT_EQ(staged[i].shape(), from[i].shape());
      ASSERT_EQ(staged[i].dtype(), from[i].dtype());
      std::memcpy(staged[i].raw(), from[i].raw(), from[i].nbytes());
    }
  };
  // Straight to the instance: Session::set_input would hand it a converted copy.
  auto run_staged = [&] {
    gpu.poison(0xFF);
    for (size_t i = 0; i < staged.size(); ++i) gpu.set_input(static_cast<int>(i), staged[i]);
    s.instance().run();
    return s.outputs();
  };
  write(a);
  const std::vector<Tensor> got_a = run_staged();
  write(b);
  const std::vector<Tensor> got_b = run_staged();
  for (size_t i = 0; i < want_a.size(); ++i) {
    EXPECT_TRUE(gputest::same_bytes(got_a[i], want_a[i])) << "output " << i;
    EXPECT_TRUE(gputest::same_bytes(got_b[i], want_b[i])) << "output " << i << " after the staging was rewritten";
  }
  EXPECT_FALSE(gputest::same_bytes(want_a[0], want_b[0]));  // the inputs differ, so the check can fail
}

// The armed-lane pattern: the next task's upload, kernels and download wait behind a hold while
// this task's outputs are collected. Collected outputs are views of pinned memory: the held
// download must not land in them, then or later.
TEST(GpuInstance, CollectedOutputsAreTheEndedTasksAndSurviveLaterDownloads) {
  ATL_REQUIRE_GPU();
  Session s(tiny("tiny_cnn"));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  const uint64_t seed = gputest::fresh_seed();
  std::vector<Tensor> want[2];
  for (int r = 0; r < 2; ++r) {
    gpu.poison(0xFF);
    s.set_inputs(s.random_inputs(seed + static_cast<uint64_t>(r)));
    s.instance().run();
    for (const Tensor& t : s.outputs()) want[r].push_back(t.clone());
  }
  std::vector<Tensor> staged = gpu.staging_inputs();
  auto write = [&](int r) {
    const std::vector<Tensor> from = s.random_inputs(seed + static_cast<uint64_t>(r));
    for (size_t i = 0; i < staged.size(); ++i) std::memcpy(staged[i].raw(), from[i].raw(), from[i].nbytes());
  };
  cudaStream_t stream = gpu.stream();
  auto enqueue_task = [&] {
    ASSERT_TRUE(gpu.stage_inputs(staged, stream, {}));
    for (int k = 0; k < static_cast<int>(s.program().kernels.size()); ++k) gpu.launch(k, stream, nullptr);
    gpu.enqueue_outputs(stream);
  };
  write(0);
  enqueue_task();
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream));
  cuda::StreamGate gate;
  gate.hold(stream);
  write(1);  // task 0's upload has ended; task 1's is held
  enqueue_task();
  const std::vector<Tensor> got0 = gpu.collect_outputs();
  gate.open();
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<Tensor> got1 = gpu.collect_outputs();
  ASSERT_EQ(got0.size(), want[0].size());
  for (size_t i = 0; i < want[0].size(); ++i) {
    EXPECT_TRUE(gputest::same_bytes(got0[i], want[0][i])) << "output " << i << " of the ended task";
    EXPECT_TRUE(gputest::same_bytes(got1[i], want[1][i])) << "output " << i << " of the held task";
  }
  EXPECT_FALSE(gputest::same_bytes(want[0][0], want[1][0]));  // the inputs differ, so the check can fail
}

// The scheduler's RT path (enqueue_program) computes what run() computes, whether it launches
// one instantiation of the program graph or rotates through two; fewer than one is refused.
TEST(GpuInstance, ProgramGraphsInRotationGiveTheRunsBytes) {
  ATL_REQUIRE_GPU();
  Session s(tiny("tiny_cnn"));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  EXPECT_EQ(gputest::code_of([&] { gpu.set_program_graphs(0); }), ErrorCode::kInvalidArgument);
  const uint64_t seed = gputest::fresh_seed();
  constexpr int kTasks = 3;
  std::vector<Tensor> want[kTasks];
  for (int r = 0; r < kTasks; ++r) {
    gpu.poison(0xFF);
    s.set_inputs(s.random_inputs(seed + static_cast<uint64_t>(r)));
    s.instance().run();
    for (const Tensor& t : s.outputs()) want[r].push_back(t.clone());
  }
  std::vector<Tensor> staged = gpu.staging_inputs();
  cudaStream_t stream = gpu.stream();
  for (int graphs : {1, 2}) {
    gpu.set_program_graphs(graphs);
    for (int r = 0; r < kTasks; ++r) {
      const std::vector<Tensor> from = s.random_inputs(seed + static_cast<uint64_t>(r));
      for (size_t i = 0; i < staged.size(); ++i) std::memcpy(staged[i].raw(), from[i].raw(), from[i].nbytes());
      gpu.poison(0xFF);
      ASSERT_TRUE(gpu.stage_inputs(staged, stream, {}));
      gpu.enqueue_program(stream);
      gpu.enqueue_outputs(stream);
      ATL_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<Tensor> got = gpu.collect_outputs();
      ASSERT_EQ(got.size(), want[r].size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(gputest::same_bytes(got[i], want[r][i])) << graphs << " graphs, task " << r << ", output " << i;
      }
    }
  }
  EXPECT_FALSE(gputest::same_bytes(want[0][0], want[1][0]));  // the inputs differ, so the check can fail
}

// Uploads and downloads by the SMs over mapped memory give the copy engines' bytes, tails that
// are not a multiple of 16 bytes included (tiny_cnn's 10 f32 logits: 40 bytes).
TEST(GpuInstance, SmCopiesGiveTheCopyEnginesBytes) {
  ATL_REQUIRE_GPU();
  for (const char* model : {"tiny_cnn", "tiny_bert"}) {
    SCOPED_TRACE(model);
    Session s(tiny(model));
    CudaInstance& gpu = gputest::as_cuda(s.instance());
    const std::vector<Tensor> inputs = s.random_inputs(gputest::fresh_seed());
    auto run = [&] {
      gpu.poison(0xFF);
      s.set_inputs(inputs);
      s.instance().run();
      std::vector<Tensor> out;
      for (const Tensor& t : s.outputs()) out.push_back(t.clone());
      return out;
    };
    const std::vector<Tensor> by_copy_engine = run();
    gpu.set_sm_copies(true);
    const std::vector<Tensor> by_sms = run();
    // An upload with the first kernel under every copy setting, run without a flag (a timing or
    // flagless run): a fresh flag read has no flag to read and must not refuse the copy.
    gpu.set_uploads_with_first_kernel(true);
    gpu.set_upload_copy({16, true});
    const std::vector<Tensor> fresh_flagless = run();
    gpu.set_upload_copy({64, false});
    const std::vector<Tensor> ahead_flagless = run();
    ASSERT_EQ(by_sms.size(), by_copy_engine.size());
    for (size_t i = 0; i < by_sms.size(); ++i) {
      EXPECT_TRUE(gputest::same_bytes(by_sms[i], by_copy_engine[i])) << i;
      EXPECT_TRUE(gputest::same_bytes(fresh_flagless[i], by_copy_engine[i])) << i;
      EXPECT_TRUE(gputest::same_bytes(ahead_flagless[i], by_copy_engine[i])) << i;
    }
  }
}

TEST(GpuInstance, MemoryReportCoversWeightsArenaAndIo) {
  ATL_REQUIRE_GPU();
  Session s(tiny("tiny_bert"));
  const MemoryReport m = s.instance().memory();
  int64_t weight_elems = 0;
  for (const TensorSpec& w : s.program().weights) weight_elems += w.shape.numel();
  // f16 or f32 per weight, each padded to 256 bytes.
  EXPECT_GE(m.weight_bytes, 2 * weight_elems);
  EXPECT_LE(m.weight_bytes, 8 * weight_elems + 256 * static_cast<int64_t>(s.program().weights.size()));
  EXPECT_EQ(m.arena_bytes, s.program().arena_bytes);
  EXPECT_GT(m.io_bytes, 0);
}

// A doorbell rings (raises its flag) when the GPU sees its own hold's gate open, not before and
// not at an earlier hold's opening; two doorbells on their own streams wait side by side.
TEST(GpuStreamGate, DoorbellRingsWhenItsHoldOpens) {
  ATL_REQUIRE_GPU();
  cuda::DeviceBuffer flags(2 * sizeof(int));
  auto* flag = static_cast<int*>(flags.get());
  ATL_CUDA_CHECK(cudaMemset(flag, 0, 2 * sizeof(int)));
  ATL_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::Stream held = cuda::make_stream(), bell0 = cuda::make_priority_stream(true), bell1 = cuda::make_stream();
  cuda::Stream reader = cuda::make_stream();
  // Pinned, so that the copy never stages through a buffer it might allocate while work is held.
  cuda::PinnedBuffer seen(sizeof(int), /*mapped=*/false);
  const auto read = [&](int i) {
    auto* v = static_cast<int*>(seen.get());
    *v = -1;
    ATL_CUDA_CHECK(cudaMemcpyAsync(v, flag + i, sizeof(int), cudaMemcpyDeviceToHost, reader.get()));
    ATL_CUDA_CHECK(cudaStreamSynchronize(reader.get()));
    return *v;
  };
  const auto rings_within = [&](int i, std::chrono::milliseconds limit) {
    const auto t0 = std::chrono::steady_clock::now();
    while (read(i) != 1) {
      if (std::chrono::steady_clock::now() - t0 > limit) return false;
    }
    return true;
  };
  cuda::load_doorbell_kernel();  // a first (lazy) load behind the hold would wait for it forever
  cuda::StreamGate gate;
  struct OpenAll {  // a failed check must not leave held work that blocks the next test's sync
    cuda::StreamGate& g;
    ~OpenAll() { g.open_all(); }
  } open_all{gate};
  gate.hold(held.get());
  cuda::PinnedBuffer rung(sizeof(uint32_t), /*mapped=*/true);
  auto* rung_word = static_cast<volatile uint32_t*>(rung.get());
  *rung_word = 0;
  const uint32_t first_token = gate.newest_hold_token();
  cuda::launch_doorbell(gate.device_word(), first_token, flag, static_cast<uint32_t*>(rung.device_alias()), bell0.get());
  gate.hold(held.get());
  cuda::launch_doorbell(gate.device_word(), gate.newest_hold_token(), flag + 1, nullptr, bell1.get());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(read(0), 0) << "rang before its gate opened";
  EXPECT_EQ(*rung_word, 0u);
  EXPECT_EQ(read(1), 0);
  gate.open();
  EXPECT_TRUE(rings_within(0, test::hang_limit(std::chrono::milliseconds(1000)))) << "the first doorbell never rang";
  const auto t0 = std::chrono::steady_clock::now();  // the report lands just after the flag
  while (*rung_word != first_token && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
  }
  EXPECT_EQ(*rung_word, first_token) << "the ring was not reported";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(read(1), 0) << "the second doorbell rang at the first hold's opening";
  gate.open();
  EXPECT_TRUE(rings_within(1, test::hang_limit(std::chrono::milliseconds(1000)))) << "the second doorbell never rang";
  ATL_CUDA_CHECK(cudaDeviceSynchronize());
}

// A stream that follows a hold waits for that hold's opening, not for a new one: the side flag's
// write lands exactly when the lane's gate opens. With no hold pending there is nothing to follow.
TEST(GpuStreamGate, FollowerWaitsForTheSameOpening) {
  ATL_REQUIRE_GPU();
  cuda::StreamGate gate;
  cuda::Stream held = cuda::make_stream(), follower = cuda::make_stream();
  EXPECT_EQ(gputest::code_of([&] { gate.follow(follower.get()); }), ErrorCode::kInvalidArgument);
  struct OpenAll {  // a failed check must not leave held work that blocks the next test's sync
    cuda::StreamGate& g;
    ~OpenAll() { g.open_all(); }
  } open_all{gate};
  cuda::PinnedBuffer words(2 * sizeof(uint32_t), /*mapped=*/true);
  auto* word = static_cast<volatile uint32_t*>(words.get());
  word[0] = 0;
  word[1] = 0;
  auto* device_words = static_cast<uint32_t*>(words.device_alias());
  gate.hold(held.get());
  gate.follow(follower.get());
  cuda::stream_write_value32(held.get(), device_words, 1);
  cuda::stream_write_value32(follower.get(), device_words + 1, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(word[0], 0u) << "the held stream ran before its gate opened";
  EXPECT_EQ(word[1], 0u) << "the follower ran before the gate opened";
  EXPECT_EQ(gate.pending(), 1u) << "following counts no hold";
  gate.open();
  ATL_CUDA_CHECK(cudaStreamSynchronize(held.get()));
  ATL_CUDA_CHECK(cudaStreamSynchronize(follower.get()));
  EXPECT_EQ(word[0], 1u);
  EXPECT_EQ(word[1], 1u);
}

}  // namespace
}  // namespace atl
