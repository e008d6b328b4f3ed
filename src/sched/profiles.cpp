#include "sched/profiles.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/error.h"
#include "sched/colocate.h"

namespace atl::sched {

ModelProfile profile_zoo_model(const ProfileRequest& r) {
  std::unique_ptr<ExecDevice> device = make_exec_device(r.device, r.sim);
  const CompiledModel cm = compile_zoo_model(r.model, device->target(), !is_simulated(*device), r.inflight_cap);
  const InstanceId instance = device->load(cm.program, cm.weights);
  return device->measure_profile(instance, r.on_kernel);
}

bool attach_profile(ExecDevice& device, InstanceId instance, std::vector<ModelProfile>& library, bool measure) {
  const Program& program = device.program(instance);
  auto* sim = dynamic_cast<SimExecDevice*>(&device);
  for (const ModelProfile& p : library) {
    if (p.fingerprint != program.fingerprint) continue;
    if (sim != nullptr) {
      sim->run_profile(instance, p);
    } else {
      device.set_profile(instance, p);
    }
    return true;
  }
  if (!measure) return false;
  spdlog::info("profiling '{}' batch {} on {} (no profile given for this build of it)", program.model, program.batch,
               device.name());
  library.push_back(device.measure_profile(instance, {}));
  device.set_profile(instance, library.back());
  return true;
}

void check_profiles_used(const std::vector<ModelProfile>& given, const std::vector<const Program*>& programs) {
  for (const ModelProfile& p : given) {
    const bool used = std::any_of(programs.begin(), programs.end(),
                                  [&](const Program* q) { return q->fingerprint == p.fingerprint; });
    ATOLL_CHECK(used, kInvalidArgument,
                "the profile of '{}' batch {} (program {}) belongs to no client of this run: profile the models as "
                "they run here (atoll profile MODEL --batch N --cap N)",
                p.model, p.batch, p.fingerprint);
  }
}

}  // namespace atl::sched
