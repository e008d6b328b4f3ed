#pragma once
// The scheduling modes and, in one table, what each one means for the scheduler: how lanes are
// laid out, whether RT tasks run at high priority, whether BE work is admitted, preempted, and
// made to exit on the flag, and whether RT tasks may wait on the device ahead of their arrival.
// scheduler.cpp asks these traits; it never tests for a mode by name.
#include <cstdint>
#include <string_view>
#include <vector>

namespace atl::sched {

enum class Mode : uint8_t {
  kRtOnly,       // RT requests only (BE requests fail): the latency baseline
  kSeq,          // one stream, one task at a time, RT first, no preemption
  kStreams,      // every client its own stream, equal priorities
  kStreamsPrio,  // as kStreams with RT streams at high priority
  kWait,         // RT mode stops BE launches; BE kernels on the device finish
  kReset,        // RT mode stops BE launches and raises the flag: BE kernels exit
  // As kReset, and while an RT task runs, BE kernels that fit (by their profiles) beside its
  // current kernel run concurrently on the BE streams: the NVIDIA-native form of REEF's padding
  kPaddingConcurrent,
  // As kPaddingConcurrent, and a BE kernel too long to fit whole runs beside the RT task in
  // slices of its output tiles, each ending within the RT kernels it overlaps (ExecDevice::
  // launch_slice): REEF's padding for BE kernels longer than RT kernels, beyond the paper.
  kPaddingSlices,
};

enum class LaneLayout : uint8_t {
  kOneLane,        // every task, RT first, on one low-priority stream
  kLanePerClient,  // every client on its own stream; tasks of different clients overlap
  kRtQueue,        // every client its own stream, but RT tasks run one at a time (REEF's RT queue)
};

struct ModeTraits {
  Mode mode;
  const char* name;
  LaneLayout layout;
  bool rt_high_priority;  // RT streams get the device's highest priority
  bool admits_be;         // BE requests are served (rt-only refuses them)
  bool preemptive;        // an RT arrival stops BE launches until the RT queue is empty
  bool raises_flag;       // ... and BE kernels on the device exit on the preemption flag
  // RT tasks can wait on the device behind holds (SchedulerOptions::armed_rt): the arrival
  // path every mode but seq shares, so that modes differ in policy alone.
  bool arms_rt;
  // While an RT task runs, BE kernels whose profiled time fits in what is left of the RT task's
  // current kernel and whose SM share fits in the SMs it leaves idle are launched beside it
  // (padding.cpp). Every client needs a kernel profile (ExecDevice::profile).
  bool pads_be;
  // ... and a BE kernel that does not fit whole runs in slices that do (padding.h, slice_beside).
  bool slices_be;
};

const ModeTraits& mode_traits(Mode m);
// "rt-only", "seq", "streams", "streams-prio", "wait", "reset", "padding-concurrent",
// "padding-slices"
const char* mode_name(Mode m);
Mode mode_from_name(std::string_view name);  // throws kInvalidArgument listing the modes
std::vector<Mode> all_modes();

}  // namespace atl::sched
