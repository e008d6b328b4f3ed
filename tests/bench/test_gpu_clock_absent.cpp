// DISB's GPU clock sampler where there is nothing to sample: the simulator's devices (no PCI
// bus id) and bus ids NVML does not know must give no summary, at once, never a hang.
#include <gtest/gtest.h>

#include <chrono>

#include "bench/gpu_clock.h"

namespace atl::bench {
namespace {

TEST(GpuClock, NothingToSampleGivesNoSummaryAtOnce) {
  for (const char* bus : {"", "0000:ff:1f.7"}) {
    SCOPED_TRACE(bus);
    const auto began = std::chrono::steady_clock::now();
    GpuClockSampler sampler(bus, 10);
    EXPECT_FALSE(sampler.stop().has_value());
    EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(5));
  }
}

}  // namespace
}  // namespace atl::bench
