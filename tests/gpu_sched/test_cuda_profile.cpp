// The kernel profiler and padding-concurrent on the GPU (label gpu; skips without one).
#include <gtest/gtest.h>

#include "../test_env.h"
#include "backends/cuda/cuda_backend.h"
#include "cuda_sched_util.h"
#include "sched/colocate.h"
#include "sched/profiles.h"

namespace atl::sched {
namespace {

TEST(CudaProfile, ProfilesEveryKernelOfAZooModelWithSaneFields) {
  REQUIRE_GPU();
  ProfileRequest r;
  r.model = {.name = "resnet50"};
  r.device = "cuda";
  int calls = 0;
  r.on_kernel = [&](int, int) { ++calls; };
  const ModelProfile p = profile_zoo_model(r);
  std::unique_ptr<ExecDevice> device = make_exec_device("cuda");
  const CompiledModel cm = compile_zoo_model(r.model, device->target(), true);
  ASSERT_EQ(p.kernels.size(), cm.program.kernels.size());
  EXPECT_EQ(calls, static_cast<int>(p.kernels.size()));
  EXPECT_NO_THROW(check_profile(p, cm.program, device->description())) << "keyed to what the runners load";
  EXPECT_GT(p.sm_count, 0);
  int with_exit = 0;
  for (const KernelProfile& k : p.kernels) {
    SCOPED_TRACE(k.name);
    EXPECT_GT(k.time_us, 0);
    if (test::timing_judged()) {
      EXPECT_LT(k.time_us, 10'000);
    }
    EXPECT_GT(k.sm_share, 0);
    EXPECT_LE(k.sm_share, 1);
    EXPECT_GE(k.grid_blocks, 1);
    EXPECT_GE(k.threads_per_block, 32);
    EXPECT_GE(k.resident_blocks_per_sm, 1);
    EXPECT_GE(k.launches, 1);
    EXPECT_DOUBLE_EQ(k.sm_share, sm_share_of(k.grid_blocks, k.resident_blocks_per_sm, p.sm_count));
    if (k.exit_us) {
      ++with_exit;
      EXPECT_GE(*k.exit_us, 0);
    }
  }
  // Kernels shorter than the raise delay finish first; the long ones have an exit latency.
  EXPECT_GT(with_exit, 0);
}

TEST(CudaProfile, PaddingConcurrentServesEveryRequest) {
  REQUIRE_GPU();
  ColocateOptions o;
  o.rt = {{.model = "resnet50", .hz = 200}};
  o.be = {{.model = "tiny_cnn"}};
  o.mode = Mode::kPaddingConcurrent;
  o.device = "cuda";
  o.duration_s = 0.3;
  const WorkloadReport r = run_colocate(o);  // throws on a failed request
  EXPECT_EQ(r.clients[0].completed, 60);
  EXPECT_GT(r.clients[1].completed, 0);
  RecordProperty("padded_kernels", std::to_string(r.padded_kernels));
}

}  // namespace
}  // namespace atl::sched
