#pragma once
// The GPU's SM clock and power over a measured run, sampled through NVML on a thread of its own:
// a lightly loaded GPU lowers its clocks between requests, so an RT-alone baseline can run its
// kernels slower than the same model beside BE work, and a comparison of the two should say so.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace atl {
class NvmlDevice;
}

namespace atl::bench {

struct GpuClockSummary {
  int samples = 0;
  double sm_mhz_mean = 0, sm_mhz_min = 0, sm_mhz_max = 0;
  double power_w_mean = 0;  // 0 where NVML reports no power
};

class GpuClockSampler {
 public:
  // Samples the device at `pci_bus_id` every `period_ms` until stop(); nothing where NVML or
  // the device is missing.
  GpuClockSampler(const std::string& pci_bus_id, int period_ms);
  ~GpuClockSampler();
  GpuClockSampler(const GpuClockSampler&) = delete;
  GpuClockSampler& operator=(const GpuClockSampler&) = delete;

  // Stops sampling; nullopt when no sample was taken.
  std::optional<GpuClockSummary> stop();

 private:
  std::unique_ptr<NvmlDevice> nvml_;
  std::atomic<bool> stop_{false};
  std::vector<double> mhz_, watts_;
  std::thread thread_;
};

}  // namespace atl::bench
