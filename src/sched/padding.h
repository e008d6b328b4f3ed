#pragma once
// The fit rule of the padding modes, apart from the scheduler so that it can be tested and
// timed alone. RT kernels leave some SMs idle for some time; a BE kernel fits beside them when
// its profiled time, counted from the moment it could start, ends before the RT kernels it
// overlaps do by their profiles, and its SM share fits in what each of them (and BE kernels
// already padded) leave. A query reads a few array entries: nanoseconds, not microseconds.
#include <cstdint>
#include <vector>

#include "profile/kernel_profile.h"
#include "sched/exec_device.h"

namespace atl::sched {

// A profile as the scheduler reads it: per kernel, time in ns and SM share.
struct KernelCosts {
  std::vector<DeviceTime> ns;
  std::vector<double> share;
  // An RT client's kernels whose ends are reported in the padding modes (padding_reports);
  // empty: every one.
  std::vector<uint8_t> reported;
  // Padding slices: per kernel, the units it can run a range of (0: whole only), the blocks of
  // one wave (resident per SM x SMs) and the time of one round of a wave's units.
  std::vector<int64_t> units;
  std::vector<int64_t> wave_blocks;
  std::vector<DeviceTime> round_ns;
  static KernelCosts from(const ModelProfile& profile);
  bool reports(int kernel) const { return reported.empty() || reported[static_cast<size_t>(kernel)] != 0; }
};

// Which of an RT task's kernels report their end while BE work pads beside it: the last, and
// one at least every `spacing` ns of profiled time (0: every kernel). A report is a stream
// write after the kernel, which on the H200 cost RT tasks 13-20% when every kernel wrote one;
// between reports the scheduler follows the task by its profile (estimated_rt_window).
std::vector<uint8_t> padding_reports(const KernelCosts& rt, DeviceTime spacing);

// How far ahead of the running RT kernel a padded BE kernel may reach: a few kernels keep a
// query a short loop.
inline constexpr int kPaddingLookahead = 8;

// The running RT task as padding sees it: its current kernel, the time that kernel has left by
// its profile, and the SM share BE kernels padded earlier still hold.
struct RtWindow {
  const KernelCosts* rt = nullptr;  // null: no RT kernel runs, nothing fits
  int kernel = 0;
  DeviceTime remaining_ns = 0;
  double padded_share = 0;
  // How far the GPU may have drifted from the profile since the task's last reported kernel:
  // a padded kernel must end this much earlier than the profile says it may.
  DeviceTime uncertainty_ns = 0;
};

// RT kernel `kernel` of `rt`, seen running since `since`, at `now`.
RtWindow rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now);

// The RT kernel running at `now`, when `kernel` is the first not reported ended and has been so
// since `since`: the profile walked forward from it, up to the next kernel that reports (whose
// end the scheduler will see; past its profiled time nothing fits, as with rt_window). The GPU
// runs off its profile by up to `drift` of the time walked (uncertainty_ns).
RtWindow estimated_rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now, double drift = 0);

// Whether BE kernel `kernel`, launched now and able to start `launch_ns` later, ends (with the
// window's uncertainty to spare) within the RT kernels it would run beside (the current one and
// up to kPaddingLookahead after it) while its share, with the padded share, fits beside each of
// them and beside the RT kernel after its end: the scheduler sees an RT kernel end only when it
// next looks, so that one may have begun.
bool fits_beside(const KernelCosts& be, int kernel, const RtWindow& window, DeviceTime launch_ns);

// A slice of a BE kernel that fits beside the RT task: `units` of it on `blocks` blocks, which
// take `share` of the SMs. units 0: none fits.
struct SliceFit {
  int64_t units = 0;
  int blocks = 0;
  double share = 0;
};

// The largest slice of BE kernel `kernel` past its first `done` units that, launched now and
// able to start `launch_ns` later, ends within the RT kernels it would run beside (as
// fits_beside) on blocks that fit in the SM share each of them leaves: blocks x rounds of
// units, each round taking the kernel's round_ns. So a BE kernel longer than any RT kernel still
// runs beside them, a slice at a time, and its units never run twice.
SliceFit slice_beside(const KernelCosts& be, int kernel, int64_t done, const RtWindow& window, DeviceTime launch_ns);

}  // namespace atl::sched
