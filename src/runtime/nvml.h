#pragma once
// NVML through dlopen, so that atoll neither links nor requires it: one CUDA device's energy,
// utilization, memory, power and SM clock, for the L2 evaluator's energy figures and the server's GPU
// metrics. Never throws: a reading that is unavailable is nullopt, and note() says why.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace atl {

class NvmlDevice {
 public:
  // `pci_bus_id` names the device (NVML and CUDA may number devices differently).
  explicit NvmlDevice(const std::string& pci_bus_id);
  ~NvmlDevice();
  NvmlDevice(const NvmlDevice&) = delete;
  NvmlDevice& operator=(const NvmlDevice&) = delete;

  bool available() const { return device_ != nullptr; }
  const std::string& uuid() const { return uuid_; }  // "GPU-...", empty when unavailable
  const std::string& note() const { return note_; }

  std::optional<double> energy_mj();    // millijoules since the driver loaded
  std::optional<double> utilization();  // 0..1: time a kernel ran over the driver's last sample period
  struct Memory {
    uint64_t used = 0, total = 0;
  };
  std::optional<Memory> memory();
  std::optional<double> power_w();
  std::optional<double> sm_clock_mhz();  // the SM clock now

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
  std::string uuid_;
  std::string note_;
};

}  // namespace atl
