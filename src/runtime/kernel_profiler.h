#pragma once
// The kernel profiler on the GPU: each kernel of a loaded CUDA instance alone, after a warm-up,
// timed by CUDA events around single launches held behind a host gate (so the host's launch
// call is never timed); its launch geometry read from a stream capture of the kernel (grid,
// threads, resident blocks per SM from the occupancy calculator); its exit latency from the
// kernel-exit probe (bench/exit_probe.h), the flag raised half way through its run.
// CUDA builds only; `atoll profile` reaches it through ExecDevice::measure_profile.
#include <functional>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "profile/kernel_profile.h"

namespace atl {

struct CudaProfileOptions {
  int warmup = 3;       // untimed launches of each kernel first
  int repeats = 15;     // timed launches; the profile keeps the median
  int exit_trials = 3;  // mid-kernel raises per kernel (0: no exit latency)
  // After each kernel: (kernels done, kernel count).
  std::function<void(int done, int total)> on_kernel;
};

// The instance must be idle and stays loaded; its outputs are stale afterwards (every kernel ran
// out of order). `device` is the description the profile is keyed to.
ModelProfile profile_cuda_instance(CudaInstance& gpu, const std::string& device, const CudaProfileOptions& options);

}  // namespace atl
