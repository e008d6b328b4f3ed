#pragma once
// The scheduler's device on a real GPU: priority streams, kernels launched one at a time through
// the CUDA backend with one shared device flag, completion counters written by the GPU into
// mapped host memory (read without synchronizing), and event pairs around timed launches.
#include <memory>

#include "sched/exec_device.h"

namespace atl::sched {

// Throws kUnsupported when this build has no CUDA backend or no device answers.
std::unique_ptr<ExecDevice> make_cuda_exec_device(int device = 0);

}  // namespace atl::sched
