#pragma once
// The fit rule of the padding modes, apart from the scheduler so that it can be tested and
// timed alone. An RT kernel leaves some SMs idle for some time; a BE kernel fits beside it when
// its profiled time, counted from the moment it could start, ends before the RT kernel's
// profiled end, and its SM share fits in what the RT kernel (and BE kernels already padded)
// leave. Every query is a few array reads: selection costs nanoseconds, not microseconds.
#include <vector>

#include "profile/kernel_profile.h"
#include "sched/exec_device.h"

namespace atl::sched {

// A profile as the scheduler reads it: per kernel, time in ns and SM share.
struct KernelCosts {
  std::vector<DeviceTime> ns;
  std::vector<double> share;
  static KernelCosts from(const ModelProfile& profile);
};

// What a running RT kernel leaves: time until its profiled end and the SMs it keeps busy.
struct RtWindow {
  DeviceTime remaining_ns = 0;
  double busy_share = 1.0;
};

// RT kernel `kernel`, seen running since `since`, at `now`. Its SM share counts with the next
// kernel's (whichever is larger): the scheduler sees a kernel's end only when it next looks, so
// the next kernel may already be running.
RtWindow rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now);

// Whether BE kernel `kernel` fits beside `window` when launched now and able to start
// `launch_ns` later.
bool fits_beside(const KernelCosts& be, int kernel, const RtWindow& window, DeviceTime launch_ns);

}  // namespace atl::sched
