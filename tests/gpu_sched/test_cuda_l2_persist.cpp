// RT clients' buffers persisting in L2 on the GPU (label gpu; skips without one): the device
// shares its set-aside among the instances and gives it back, and a DISB run with `--rt-l2`
// serves every request in every mode with the set-aside in place.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "backends/cuda/cuda_backend.h"
#include "bench/runner.h"
#include "cuda_sched_util.h"
#include "runtime/model_source.h"
#include "sched/cuda_exec_device.h"

namespace atl {
namespace {

int64_t device_limit() {
  size_t bytes = 0;
  EXPECT_EQ(cudaDeviceGetLimit(&bytes, cudaLimitPersistingL2CacheSize), cudaSuccess);
  return static_cast<int64_t>(bytes);
}

int64_t largest_setaside() {
  int bytes = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxPersistingL2CacheSize, 0), cudaSuccess);
  return bytes;
}

TEST(CudaL2Persistence, SetAsideIsSharedAndGivenBack) {
  REQUIRE_GPU();
  {
    std::unique_ptr<sched::ExecDevice> device = sched::make_cuda_exec_device();
    std::vector<sched::InstanceId> rt;
    for (const char* model : {"tiny_cnn", "mobilenet_v2"}) {
      const CompiledModel cm = compile_zoo_model({.name = model, .seed = 1}, device->target(), true);
      rt.push_back(device->load(cm.program, cm.weights));
    }
    const int64_t budget = 4 << 20;
    const int64_t granted = device->set_l2_persistence(rt, L2Persist::kWeights, budget);
    EXPECT_GE(granted, std::min(budget, largest_setaside())) << "the driver rounds up, never down";
    EXPECT_EQ(device_limit(), granted);
    const int64_t all = device->set_l2_persistence(rt, L2Persist::kArena, std::numeric_limits<int64_t>::max());
    EXPECT_GE(all, granted);
    EXPECT_LE(all, largest_setaside()) << "a budget above the device's largest set-aside gets at most the largest";
    EXPECT_EQ(device->set_l2_persistence(rt, L2Persist::kOff, budget), 0);
    EXPECT_EQ(device_limit(), 0);
    device->set_l2_persistence(rt, L2Persist::kWeights, budget);
  }
  EXPECT_EQ(device_limit(), 0) << "a device that set a set-aside gives it back when it goes";
}

TEST(CudaL2Persistence, DisbWithRtWeightsPersistingServesEveryRequest) {
  REQUIRE_GPU();
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "atoll_rt_l2";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "persist.json").string();
  {
    std::ofstream f(path);
    f << R"({"name": "persist", "clients": [
      {"name": "rt0", "model": "mobilenet_v2", "priority": "rt", "load": {"type": "periodic", "rate": 200}},
      {"name": "rt1", "model": "tiny_vgg", "priority": "rt", "load": {"type": "poisson", "rate": 300}},
      {"name": "be", "model": "resnet18", "batch": 8, "priority": "be", "load": {"type": "closed"}}]})";
  }
  const bench::Workload w = bench::load_disb_workload(path, {});
  bench::DisbOptions o;
  o.device = "cuda";
  o.modes = {sched::Mode::kRtOnly, sched::Mode::kReset, sched::Mode::kStreams};
  o.duration_s = 0.5;
  o.standalone_s = 0.1;
  o.timeline_ms = 10;
  o.rt_l2 = L2Persist::kWeights;
  const bench::BenchResults r = bench::run_disb(w, o);
  EXPECT_EQ(r.rt_l2, "weights");
  ASSERT_EQ(r.runs.size(), 3u);
  for (size_t m = 0; m < r.runs.size(); ++m) {
    SCOPED_TRACE(r.stats[m].mode);
    EXPECT_GT(r.runs[m].l2_persisting_bytes, 0);
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_GT(r.stats[m].clients[c].served, 0);
      EXPECT_EQ(r.stats[m].clients[c].dropped, 0);
      EXPECT_EQ(r.stats[m].clients[c].failed, 0);
    }
  }
  EXPECT_EQ(device_limit(), 0);
}

}  // namespace
}  // namespace atl
