#include "runtime/devices.h"

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef ATOLL_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace atl {

namespace {
bool cuda_present() {
#ifdef ATOLL_HAVE_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}
}  // namespace

std::vector<std::string> available_devices() {
  std::vector<std::string> d{"cpu"};
  if (cuda_present()) d.insert(d.begin(), "cuda");
  return d;
}

std::string resolve_device(const std::string& requested, std::string* note) {
  if (requested != "auto") return requested;
  if (cuda_present()) return "cuda";
  if (note) {
#ifdef ATOLL_HAVE_CUDA
    *note = "no CUDA device found: running on the CPU reference backend";
#else
    *note = "this build has no CUDA backend (nvcc was not found at configure time): running on the CPU";
#endif
  }
  return "cpu";
}

std::unique_ptr<Backend> make_backend(const std::string& device) {
  const std::string d = resolve_device(device);
  if (d == "cpu") return make_cpu_backend();
  if (d == "cuda") {
#ifdef ATOLL_HAVE_CUDA
    ATOLL_CHECK(cuda_device_available(), kUnsupported, "--device cuda: no CUDA device is available");
    return make_cuda_backend();
#else
    ATOLL_THROW(kUnsupported, "--device cuda: this build has no CUDA backend (configure with nvcc present)");
#endif
  }
  ATOLL_THROW(kInvalidArgument, "unknown device '{}' (expected auto, cpu or cuda)", device);
}

}  // namespace atl
