#pragma once
// Kernel profiles for the scheduler's runners: profiling a zoo model on a device exactly as the
// runners compile it (so the fingerprints match), and giving each loaded instance its profile.
#include <functional>
#include <string>
#include <vector>

#include "profile/kernel_profile.h"
#include "runtime/model_source.h"
#include "sched/exec_device.h"
#include "sched/sim_exec_device.h"

namespace atl::sched {

struct ProfileRequest {
  ZooModel model;
  std::string device = "sim";  // sim or cuda (make_exec_device)
  int inflight_cap = 4;        // as the runners compile: SchedulerOptions::inflight_cap
  SimExecOptions sim;
  std::function<void(int done, int total)> on_kernel;
};

ModelProfile profile_zoo_model(const ProfileRequest& request);

// Gives `instance` the first profile in `library` that belongs to its program; on the simulator
// its kernels then take the profiled times, elsewhere a profile of another device is refused
// (ExecDevice::set_profile). With none there and `measure`, profiles the instance on the device
// and adds the result to `library` for later runs. Returns whether the instance has a profile now.
bool attach_profile(ExecDevice& device, InstanceId instance, std::vector<ModelProfile>& library, bool measure);

// Throws kInvalidArgument naming a given profile that belongs to none of `programs`: a profile
// of another batch, in-flight cap or build would otherwise be ignored without a word.
void check_profiles_used(const std::vector<ModelProfile>& given, const std::vector<const Program*>& programs);

}  // namespace atl::sched
