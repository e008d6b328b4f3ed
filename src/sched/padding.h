#pragma once
// The fit rule of the padding modes, apart from the scheduler so that it can be tested and
// timed alone. RT kernels leave some SMs idle for some time; a BE kernel fits beside them when
// its profiled time, counted from the moment it could start, ends before the RT kernels it
// overlaps do by their profiles, and its SM footprint fits in what each of them (and BE kernels
// already padded) leave: whole kernels by slot share, slices and capped grids by SM spread
// (slice_beside, capped_beside). A query reads a few array entries: nanoseconds, not microseconds.
#include <cstdint>
#include <vector>

#include "profile/kernel_profile.h"
#include "sched/exec_device.h"

namespace atl::sched {

// A profile as the scheduler reads it: per kernel, time in ns, slot share and SM spread.
struct KernelCosts {
  std::vector<DeviceTime> ns;
  // The block slots the kernel fills (KernelProfile::sm_share): whole kernels fit by it.
  std::vector<double> share;
  // The SMs its blocks reach, min(1, grid blocks / SMs): the block scheduler spreads blocks over
  // SMs before it stacks them, so a grid of one block per SM at 2 resident per SM has share 0.5
  // but touches every SM. Slices fit by it (slice_beside).
  std::vector<double> spread;
  int sm_count = 0;  // the device's SMs (ModelProfile::sm_count)
  // An RT client's kernels whose ends are reported in the padding modes (padding_reports);
  // empty: every one.
  std::vector<uint8_t> reported;
  // Padding slices: per kernel, the units it can run a range of (0: whole only), the blocks of
  // one wave (resident per SM x SMs) and the time of one round of a wave's units.
  std::vector<int64_t> units;
  std::vector<int64_t> wave_blocks;
  std::vector<DeviceTime> round_ns;
  // Capped grids: per kernel, whether its one unit is the whole of a grid-stride kernel
  // (KernelProfile::grid_stride), and the blocks of its full grid (KernelProfile::grid_blocks).
  std::vector<uint8_t> grid_stride;
  std::vector<int64_t> grid_blocks;
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
// its profile, and the slot share and SM spread BE kernels padded earlier still hold.
struct RtWindow {
  const KernelCosts* rt = nullptr;  // null: no RT kernel runs, nothing fits
  int kernel = 0;
  DeviceTime remaining_ns = 0;
  double padded_share = 0;
  double padded_spread = 0;
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
// reach `spread` of the SMs (one each) and fill `slot_share` of the block slots (what
// fits_beside counts for it). units 0: none fits.
struct SliceFit {
  int64_t units = 0;
  int blocks = 0;
  double spread = 0;
  double slot_share = 0;
};

// The largest slice of BE kernel `kernel` past its first `done` units that, launched now and
// able to start `launch_ns` later, ends within the RT kernels it would run beside (as
// fits_beside) on blocks that fit in the SMs each of them leaves: blocks x rounds of units, each
// round taking the kernel's round_ns. So a BE kernel longer than any RT kernel still runs beside
// them, a slice at a time, and its units never run twice. Each slice block is taken to hold an
// SM of its own (a TMA GEMM block fills an SM's shared memory), and an RT kernel to hold every
// SM its blocks spread over, however few slots it fills: fitted by slot share, slices beside an
// RT ResNet-50 raised its p99 by 37.6% on the H200 (reset: 7.6%), SMs taken from the RT kernels
// being the suspected cause. So a slice gets at most (1 - padded spread - RT spread) x SMs blocks.
SliceFit slice_beside(const KernelCosts& be, int kernel, int64_t done, const RtWindow& window, DeviceTime launch_ns);

// Capped grids: grid-stride BE kernel `kernel` (memory-bound kernels, whose grids fill every SM
// and so never fit whole, nor slice as tiles) whole on the most blocks b, one SM each, that the
// RT kernels it would run beside leave (as slice_beside counts them) and on which it ends within
// them (as fits_beside walks them). Its time on b blocks is taken as ns x full grid / b, at least
// ns: every block of the full grid is charged the kernel's whole time, which a block's share of a
// memory-bound kernel on fewer SMs, with more bandwidth each, does not exceed. units 1 and
// blocks b, or units 0: none fits (or the kernel is not grid-stride).
SliceFit capped_beside(const KernelCosts& be, int kernel, const RtWindow& window, DeviceTime launch_ns);

}  // namespace atl::sched
