// Idempotence and preemption on real programs: every kernel of every zoo model re-runs to the
// same bits and stops at entry while the flag is raised; a flag raised mid-run stops the run
// (also inside long blocks), and clearing it and re-running gives the unpreempted output.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "../backends/op_cases.h"
#include "../test_env.h"
#include "backends/cuda/cuda_check.h"
#include "gpu_test_util.h"
#include "runtime/session.h"

namespace atl {
namespace {

SessionOptions cuda_options(const std::string& model, int64_t batch) {
  SessionOptions o;
  o.model = model;
  o.device = "cuda";
  o.model_options.batch = batch;
  return o;
}

class GpuKernelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuKernelTest, EveryKernelStopsAtEntryAndIsIdempotent) {
  ATL_REQUIRE_GPU();
  Session s(cuda_options(GetParam(), 1));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  const Program& p = s.program();
  s.set_inputs(s.random_inputs(gputest::fresh_seed()));

  // Flag raised before each launch: no kernel writes anything, so the poison survives.
  gpu.poison(0xFF);
  gputest::set_flag(gpu.preempt_flag(), 1);
  for (size_t k = 0; k < p.kernels.size(); ++k) gpu.launch(static_cast<int>(k), gpu.stream(), gpu.preempt_flag());
  for (const Kernel& k : p.kernels) {
    EXPECT_TRUE(gputest::all_bytes_are(gpu.read_binding(k.outputs[0]), 0xFF)) << "kernel '" << k.name << "' wrote";
  }
  gputest::set_flag(gpu.preempt_flag(), 0);

  // Each kernel, launched twice on its inputs, writes the same bits both times.
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& kernel = p.kernels[k];
    gpu.launch(static_cast<int>(k), gpu.stream(), gpu.preempt_flag());
    const std::vector<std::byte> first = gpu.read_binding(kernel.outputs[0]);
    gpu.launch(static_cast<int>(k), gpu.stream(), gpu.preempt_flag());
    EXPECT_EQ(gpu.read_binding(kernel.outputs[0]), first) << "kernel '" << kernel.name << "' is not idempotent";
    EXPECT_FALSE(gputest::all_bytes_are(first, 0xFF)) << "kernel '" << kernel.name << "' wrote nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, GpuKernelTest, ::testing::ValuesIn(gputest::zoo_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Milliseconds between two events recorded around `enqueue` on `stream`.
template <typename Fn>
double timed_ms(cudaStream_t stream, Fn&& enqueue) {
  cuda::Event start = cuda::make_event(true), stop = cuda::make_event(true);
  ATL_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  enqueue();
  ATL_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  ATL_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

// Raises the flag from a control stream `after` the call, while the GPU is busy on another stream.
void raise_flag_after(int* flag, std::chrono::microseconds after, cudaStream_t control, int* pinned_one) {
  std::this_thread::sleep_for(after);
  ATL_CUDA_CHECK(cudaMemcpyAsync(flag, pinned_one, sizeof(int), cudaMemcpyHostToDevice, control));
}

TEST(GpuPreemption, MidRunStopClearRerunIsBitExact) {
  ATL_REQUIRE_GPU();
  Session s(cuda_options("resnet50", 8));
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  s.set_inputs(s.random_inputs(gputest::fresh_seed()));
  s.instance().run();
  const std::vector<Tensor> clean = s.outputs();

  constexpr int kRuns = 20;
  const double one_run = timed_ms(gpu.stream(), [&] { gpu.enqueue_run(); });
  cuda::Stream control = cuda::make_stream();
  cuda::PinnedBuffer one(sizeof(int), false);
  *static_cast<int*>(one.get()) = 1;
  // When the flag landed, read on the device: a host that oversleeps (seen: milliseconds on a busy
  // machine) moves the landing, not what the flag must do after it.
  cuda::Event start = cuda::make_event(true), landed = cuda::make_event(true), stop = cuda::make_event(true);
  ATL_CUDA_CHECK(cudaEventRecord(start.get(), gpu.stream()));
  for (int i = 0; i < kRuns; ++i) gpu.enqueue_run();
  ATL_CUDA_CHECK(cudaEventRecord(stop.get(), gpu.stream()));
  raise_flag_after(gpu.preempt_flag(), std::chrono::microseconds(static_cast<int64_t>(one_run * 3000)), control.get(),
                   static_cast<int*>(one.get()));
  ATL_CUDA_CHECK(cudaEventRecord(landed.get(), control.get()));
  ATL_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  ATL_CUDA_CHECK(cudaEventSynchronize(landed.get()));
  float before_ms = 0, total_ms = 0;
  ATL_CUDA_CHECK(cudaEventElapsedTime(&before_ms, start.get(), landed.get()));
  ATL_CUDA_CHECK(cudaEventElapsedTime(&total_ms, start.get(), stop.get()));
  const double runs_left = kRuns - before_ms / one_run;
  ASSERT_GT(runs_left, 5) << "the flag landed " << before_ms << " ms in, too late to show anything";
  // The runs after the flag stop their kernels at entry: far less than running them.
  EXPECT_LT(total_ms - before_ms, 0.5 * runs_left * one_run)
      << "one run " << one_run << " ms, flag at " << before_ms << " ms of " << total_ms;

  gputest::set_flag(gpu.preempt_flag(), 0);
  gpu.poison(0xFF);
  s.instance().run();
  const std::vector<Tensor> rerun = s.outputs();
  for (size_t i = 0; i < clean.size(); ++i) EXPECT_TRUE(gputest::same_bytes(rerun[i], clean[i])) << "output " << i;
}

// One GEMM of a few blocks on `tile`, each running thousands of K tiles (about a millisecond): a
// flag raised a quarter in ends it well before its end, and a rerun after the stop is exact.
void expect_stop_inside_main_loop(const std::string& tile, int check_tiles) {
  opcases::OpCase c;
  c.name = "long_gemm";
  c.op = OpKind::kGemm;
  c.attrs = Attrs{{"bias", int64_t{0}}, {"residual", int64_t{0}}, {"act", std::string("none")}};
  constexpr int64_t kK = 1 << 17;
  opcases::Operand x, w;
  x.name = "x";
  x.shape = Shape{128, kK};
  w.name = "w";
  w.role = opcases::Operand::Role::kWeight;
  w.shape = Shape{128, kK};
  w.scale = 0.01f;
  c.operands = {x, w};
  const opcases::OpCaseData data = c.build(DType::kF16, gputest::fresh_seed());
  CudaBackendOptions options;  // every tile, the ping-pong one included
  options.pingpong = true;
  options.gemm_check_tiles = check_tiles;
  options.cluster_tile = true;
  auto inst = make_cuda_backend(options)->load(data.program, data.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  int unsplit = -1;
  for (int i = 0; i < gpu.gemm_choice_count(0); ++i) {
    gpu.select_gemm_choice(0, i);
    if (gpu.gemm_choice(0) == tile) unsplit = i;
  }
  const bool hopper_tile = std::string("wtpdc").find(tile.front()) != std::string::npos;
  if (unsplit < 0 && !hopper_tile) FAIL() << "no tile " << tile;
  if (unsplit < 0) GTEST_SKIP() << "this device or build offers no " << tile << " tile";
  ASSERT_GE(unsplit, 0);
  gpu.select_gemm_choice(0, unsplit);
  inst->set_input(0, data.inputs[0]);
  inst->run();
  const Tensor clean = inst->get_output(0);
  const double full = timed_ms(gpu.stream(), [&] { gpu.launch(0, gpu.stream(), gpu.preempt_flag()); });

  cuda::Stream control = cuda::make_stream();
  cuda::PinnedBuffer one(sizeof(int), false);
  *static_cast<int*>(one.get()) = 1;
  const double stopped = timed_ms(gpu.stream(), [&] {
    gpu.launch(0, gpu.stream(), gpu.preempt_flag());
    raise_flag_after(gpu.preempt_flag(), std::chrono::microseconds(static_cast<int64_t>(full * 250)), control.get(),
                     static_cast<int*>(one.get()));
  });
  ATL_CUDA_CHECK(cudaStreamSynchronize(control.get()));
  // Every block has passed its entry check long before the flag rises: only the in-loop check
  // can end the kernel this early.
  EXPECT_LT(stopped, 0.6 * full) << "full " << full << " ms, " << check_tiles << " K tiles between checks";

  gputest::set_flag(gpu.preempt_flag(), 0);
  gpu.poison(0xFF);
  inst->run();
  EXPECT_TRUE(gputest::same_bytes(inst->get_output(0), clean)) << check_tiles << " K tiles between checks";
}

// Tiles of every GEMM kernel: mma.sync, and the wgmma and TMA ones where the device offers them.
class GpuLongBlocks : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuLongBlocks, StopInsideTheirMainLoop) {
  ATL_REQUIRE_GPU();
  expect_stop_inside_main_loop(GetParam(), CudaBackendOptions{}.gemm_check_tiles);
}

// The TMA kernels' check distance (ATOLL_CUDA_GEMM_CHECK_TILES) at its ends and between.
TEST(GpuLongBlocksCheckDistance, TmaTilesStopAtEveryDistance) {
  ATL_REQUIRE_GPU();
  for (const char* tile : {"t128x256/s1", "p128x128/s1"}) {
    for (const int check_tiles : {1, 4, 16}) {
      SCOPED_TRACE(::testing::Message() << tile << ", " << check_tiles << " K tiles between checks");
      expect_stop_inside_main_loop(tile, check_tiles);
      if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
    }
  }
}


// The wgmma epilogues' check distance (ATOLL_CUDA_GEMM_EPI_CHECK_CHUNKS) changes where they
// test the flag, never what they write: with the flag passed and low, every tile's output at
// 1, 4 and 8 chunks is byte for byte the one at the default's 2.
TEST(GpuEpilogueCheckDistance, EveryTileWritesTheSameAtEveryDistance) {
  ATL_REQUIRE_GPU();
  opcases::OpCase c;
  c.name = "epilogue_gemm";
  c.op = OpKind::kGemm;
  c.attrs = Attrs{{"bias", int64_t{1}}, {"residual", int64_t{1}}, {"act", std::string("relu")}};
  opcases::Operand x, w, b, r;  // the order of gemm_3d_bias_residual_gelu (tests/backends/op_cases.cpp)
  x.name = "x";
  x.shape = Shape{256, 512};
  w.name = "w";
  w.role = opcases::Operand::Role::kWeight;
  w.shape = Shape{512, 512};
  w.scale = 0.05f;
  b.name = "b";
  b.role = opcases::Operand::Role::kWeight;
  b.shape = Shape{512};
  r.name = "residual";
  r.shape = Shape{256, 512};
  c.operands = {x, w, b, r};
  const opcases::OpCaseData data = c.build(DType::kF16, gputest::fresh_seed());
  const auto outputs = [&](int chunks) {
    CudaBackendOptions options;
    options.pingpong = true;
    options.gemm_epi_check_chunks = chunks;
    auto inst = make_cuda_backend(options)->load(data.program, data.weights);
    CudaInstance& gpu = gputest::as_cuda(*inst);
    for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
    gputest::set_flag(gpu.preempt_flag(), 0);
    std::vector<std::pair<std::string, Tensor>> by_tile;
    for (int i = 0; i < gpu.gemm_choice_count(0); ++i) {
      gpu.select_gemm_choice(0, i);
      gpu.poison(0xFF);
      inst->run();  // with the flag: the instance is preemptible by default
      by_tile.emplace_back(gpu.gemm_choice(0), inst->get_output(0));
    }
    return by_tile;
  };
  const auto want = outputs(2);
  ASSERT_FALSE(want.empty());
  for (const int chunks : {1, 4, 8}) {
    const auto got = outputs(chunks);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first);
      EXPECT_TRUE(gputest::same_bytes(got[i].second, want[i].second)) << want[i].first << ", " << chunks << " chunks";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, GpuLongBlocks,
                         ::testing::Values("64x64/s1", "w64x64/s1", "w128x128/s1", "t128x64/s1", "t128x128/s1",
                                           "t128x256/s1", "p128x128/s1", "d128x64/s1", "c256x256/s1",
                                           "c256x128/s1", "c256x512/s1"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.find('/'));
                           return name;
                         });

TEST(GpuMemory, FlatOverManyRuns) {
  ATL_REQUIRE_GPU();
  if (!test::timing_judged()) {
    GTEST_SKIP() << "reads the device's free memory, which other processes change at ATOLL_TEST_SLOWDOWN "
                 << test::slowdown();
  }
  Session s(cuda_options("mobilenet_v2", 1));
  s.set_inputs(s.random_inputs(1));
  s.instance().run();
  size_t free_before = 0, free_after = 0, total = 0;
  ATL_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  for (int i = 0; i < 200; ++i) s.instance().run();
  ATL_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_after, free_before);
  const MemoryReport m = s.instance().memory();
  EXPECT_GT(m.weight_bytes, 0);
  EXPECT_EQ(m.arena_bytes, s.program().arena_bytes);
}

}  // namespace
}  // namespace atl
