// DISB's GPU clock sampler on the real device (label gpu; skips without one or without NVML).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "backends/cuda/cuda_backend.h"
#include "bench/gpu_clock.h"
#include "sched/cuda_exec_device.h"

namespace atl::bench {
namespace {

TEST(GpuClock, SamplesTheDevicesSmClockWhileRunning) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const auto device = sched::make_cuda_exec_device();
  GpuClockSampler sampler(device->pci_bus_id(), 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::optional<GpuClockSummary> s = sampler.stop();
  if (!s) GTEST_SKIP() << "NVML gave no clock reading for " << device->pci_bus_id();
  EXPECT_GE(s->samples, 5);
  EXPECT_GT(s->sm_mhz_min, 0.0);
  EXPECT_LE(s->sm_mhz_min, s->sm_mhz_mean);
  EXPECT_LE(s->sm_mhz_mean, s->sm_mhz_max);
  EXPECT_LT(s->sm_mhz_max, 5000.0);  // MHz, not Hz or kHz
}

}  // namespace
}  // namespace atl::bench
