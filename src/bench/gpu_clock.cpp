#include "bench/gpu_clock.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "runtime/nvml.h"

namespace atl::bench {

GpuClockSampler::GpuClockSampler(const std::string& pci_bus_id, int period_ms) {
  if (pci_bus_id.empty()) return;
  nvml_ = std::make_unique<NvmlDevice>(pci_bus_id);
  if (!nvml_->available()) return;
  thread_ = std::thread([this, period_ms] {
    while (!stop_.load(std::memory_order_relaxed)) {
      if (const auto mhz = nvml_->sm_clock_mhz()) mhz_.push_back(*mhz);
      if (const auto w = nvml_->power_w()) watts_.push_back(*w);
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
    }
  });
}

GpuClockSampler::~GpuClockSampler() {
  stop();
}

std::optional<GpuClockSummary> GpuClockSampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (mhz_.empty()) return std::nullopt;
  GpuClockSummary s;
  s.samples = static_cast<int>(mhz_.size());
  s.sm_mhz_mean = std::accumulate(mhz_.begin(), mhz_.end(), 0.0) / static_cast<double>(mhz_.size());
  const auto [lo, hi] = std::minmax_element(mhz_.begin(), mhz_.end());
  s.sm_mhz_min = *lo;
  s.sm_mhz_max = *hi;
  if (!watts_.empty()) s.power_w_mean = std::accumulate(watts_.begin(), watts_.end(), 0.0) / static_cast<double>(watts_.size());
  return s;
}

}  // namespace atl::bench
