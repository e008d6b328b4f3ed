// Mid-kernel preemption of every kernel of every zoo model at batch 8: the flag rises at a
// random moment of the kernel's run (device clock, bench/exit_probe.h); the kernel must
// leave within a generous bound (atoll_bench_kernel_exit holds the real target), and re-running
// it from scratch onto poisoned outputs must give the bits of an uninterrupted run; so must a run
// launched on a flag that another stream's kernel had just read low through L1.
#include <gtest/gtest.h>

#include <random>

#include "../test_env.h"
#include "backends/cuda/exit_probe.h"
#include "gpu_test_util.h"
#include "runtime/session.h"

namespace atl {
namespace {

constexpr double kExitBoundUs = 100.0;
constexpr int kTrialsPerKernel = 2;

class GpuKernelExitTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuKernelExitTest, EveryKernelLeavesMidRunAndRerunsBitExact) {
  ATL_REQUIRE_GPU();
  SessionOptions o;
  o.model = GetParam();
  o.device = "cuda";
  o.model_options.batch = 8;
  Session s(o);
  CudaInstance& gpu = gputest::as_cuda(s.instance());
  const Program& p = s.program();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << GetParam() << " seed " << seed);
  s.set_inputs(s.random_inputs(seed));
  s.instance().run();  // every kernel loaded; the arena holds a real run

  bench::ExitProbe probe;
  probe.calibrate_gap_us(20);
  std::mt19937_64 rng(seed);
  int* flag = gpu.preempt_flag();
  int measured = 0;
  // In Program order, so each kernel's inputs are the ones an uninterrupted run gives it.
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& kernel = p.kernels[k];
    const bench::ExitProbe::Victim victim = [&](cudaStream_t st, const int* f) {
      gpu.launch(static_cast<int>(k), st, f);
    };
    const double duration = probe.duration_us(victim, flag, 1);
    std::vector<std::vector<std::byte>> want;
    for (const Binding& b : kernel.outputs) want.push_back(gpu.read_binding(b));
    std::uniform_real_distribution<double> when(0.0, duration);
    for (int t = 0; t < kTrialsPerKernel; ++t) {
      for (const Binding& b : kernel.outputs) gpu.poison_binding(b, 0xFF);
      const bench::ExitTrial e = probe.trial(victim, flag, when(rng));
      if (!e.ran_to_end) {
        ++measured;
        if (test::timing_judged()) {
          EXPECT_LE(e.exit_us, kExitBoundUs)
              << "kernel '" << kernel.name << "' (" << duration << " us) raised at " << e.raise_us << " us";
        }
      }
      for (const Binding& b : kernel.outputs) gpu.poison_binding(b, 0xFF);
      probe.duration_us(victim, flag, 1);  // from scratch, flag low
      for (size_t i = 0; i < kernel.outputs.size(); ++i) {
        EXPECT_EQ(gpu.read_binding(kernel.outputs[i]), want[i]) << "kernel '" << kernel.name << "' output " << i;
      }
    }
    // Launched on a raised flag that another stream's kernel had just read low through L1: at
    // worst each block runs one item, never more than the whole kernel; a rerun is still exact.
    for (const Binding& b : kernel.outputs) gpu.poison_binding(b, 0xFF);
    const double stale = probe.stale_entry_us(victim, flag, 1);
    if (test::timing_judged()) {
      EXPECT_LE(stale, duration + kExitBoundUs) << "kernel '" << kernel.name << "'";
    }
    probe.duration_us(victim, flag, 1);
    for (size_t i = 0; i < kernel.outputs.size(); ++i) {
      EXPECT_EQ(gpu.read_binding(kernel.outputs[i]), want[i]) << "kernel '" << kernel.name << "' output " << i << ", stale entry";
    }
  }
  // Most raises land inside the kernel: the test must have measured exits, not only late raises.
  EXPECT_GT(measured, static_cast<int>(p.kernels.size()) / 2);
}

INSTANTIATE_TEST_SUITE_P(Zoo, GpuKernelExitTest, ::testing::ValuesIn(gputest::zoo_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace atl
