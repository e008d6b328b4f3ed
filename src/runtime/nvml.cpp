#include "runtime/nvml.h"

#include <dlfcn.h>
#include <fmt/core.h>

#include <array>

namespace atl {

// The NVML entry points used, resolved from the library at construction.
struct NvmlDevice::Api {
  void* lib = nullptr;
  bool initialized = false;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_bus)(const char*, void**) = nullptr;
  int (*energy)(void*, unsigned long long*) = nullptr;
  int (*utilization)(void*, unsigned int*) = nullptr;  // nvmlUtilization_t: {gpu, memory} percent
  int (*memory)(void*, unsigned long long*) = nullptr;  // nvmlMemory_t: {total, free, used} bytes
  int (*power)(void*, unsigned int*) = nullptr;         // milliwatts
  int (*clock)(void*, int, unsigned int*) = nullptr;    // nvmlClockType_t (0 graphics, 1 SM), MHz
  int (*uuid)(void*, char*, unsigned int) = nullptr;
};

namespace {
template <typename Fn>
void resolve(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
}
}  // namespace

NvmlDevice::NvmlDevice(const std::string& pci_bus_id) : api_(std::make_unique<Api>()) {
  Api& a = *api_;
  a.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (a.lib == nullptr) {
    note_ = fmt::format("NVML not loadable: {}", dlerror());
    return;
  }
  resolve(a.lib, "nvmlInit_v2", a.init);
  resolve(a.lib, "nvmlShutdown", a.shutdown);
  resolve(a.lib, "nvmlDeviceGetHandleByPciBusId_v2", a.by_bus);
  resolve(a.lib, "nvmlDeviceGetTotalEnergyConsumption", a.energy);
  resolve(a.lib, "nvmlDeviceGetUtilizationRates", a.utilization);
  resolve(a.lib, "nvmlDeviceGetMemoryInfo", a.memory);
  resolve(a.lib, "nvmlDeviceGetPowerUsage", a.power);
  resolve(a.lib, "nvmlDeviceGetClockInfo", a.clock);
  resolve(a.lib, "nvmlDeviceGetUUID", a.uuid);
  if (!a.init || !a.shutdown || !a.by_bus) {
    note_ = "NVML lacks nvmlInit_v2, nvmlShutdown or nvmlDeviceGetHandleByPciBusId_v2";
    return;
  }
  if (const int rc = a.init(); rc != 0) {
    note_ = fmt::format("nvmlInit_v2 failed with NVML error {}", rc);
    return;
  }
  a.initialized = true;
  if (const int rc = a.by_bus(pci_bus_id.c_str(), &device_); rc != 0) {
    note_ = fmt::format("NVML has no device at PCI bus id {} (error {})", pci_bus_id, rc);
    device_ = nullptr;
    return;
  }
  std::array<char, 96> id{};
  if (a.uuid && a.uuid(device_, id.data(), static_cast<unsigned>(id.size())) == 0) uuid_ = id.data();
}

NvmlDevice::~NvmlDevice() {
  if (api_->initialized) api_->shutdown();
  if (api_->lib != nullptr) dlclose(api_->lib);
}

std::optional<double> NvmlDevice::energy_mj() {
  unsigned long long mj = 0;
  if (device_ == nullptr) return std::nullopt;
  if (!api_->energy) {
    note_ = "NVML lacks nvmlDeviceGetTotalEnergyConsumption";
    return std::nullopt;
  }
  if (const int rc = api_->energy(device_, &mj); rc != 0) {
    note_ = fmt::format("nvmlDeviceGetTotalEnergyConsumption failed with NVML error {}", rc);
    return std::nullopt;
  }
  return static_cast<double>(mj);
}

std::optional<double> NvmlDevice::utilization() {
  std::array<unsigned int, 2> rates{};
  if (device_ == nullptr || !api_->utilization || api_->utilization(device_, rates.data()) != 0) return std::nullopt;
  return rates[0] / 100.0;
}

std::optional<NvmlDevice::Memory> NvmlDevice::memory() {
  std::array<unsigned long long, 3> m{};
  if (device_ == nullptr || !api_->memory || api_->memory(device_, m.data()) != 0) return std::nullopt;
  return Memory{m[2], m[0]};
}

std::optional<double> NvmlDevice::power_w() {
  unsigned int mw = 0;
  if (device_ == nullptr || !api_->power || api_->power(device_, &mw) != 0) return std::nullopt;
  return mw / 1000.0;
}

std::optional<double> NvmlDevice::sm_clock_mhz() {
  constexpr int kSmClock = 1;  // NVML_CLOCK_SM
  unsigned int mhz = 0;
  if (device_ == nullptr || !api_->clock || api_->clock(device_, kSmClock, &mhz) != 0) return std::nullopt;
  return static_cast<double>(mhz);
}

}  // namespace atl
