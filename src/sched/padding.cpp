// Padding, as the NVIDIA-native alternative (a) of REEF's dynamic kernel padding: while an RT
// task runs, a BE lane whose next kernel fits beside the RT task's current kernel (padding.h)
// launches it, not preemptible, on its own low-priority stream. One padded kernel per lane is
// in flight at a time; the lane's cursor moves on as it ends, so a padded kernel never runs
// again, and a later reset cuts only the launches after it.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sched/scheduler_impl.h"

namespace atl::sched {

KernelCosts KernelCosts::from(const ModelProfile& profile) {
  KernelCosts c;
  c.ns.reserve(profile.kernels.size());
  c.share.reserve(profile.kernels.size());
  for (const KernelProfile& k : profile.kernels) {
    c.ns.push_back(std::max<DeviceTime>(1, static_cast<DeviceTime>(std::llround(k.time_us * 1e3))));
    c.share.push_back(k.sm_share);
  }
  return c;
}

RtWindow rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now) {
  return RtWindow{&rt, kernel, rt.ns[static_cast<size_t>(kernel)] - (now - since), 0.0};
}

std::vector<uint8_t> padding_reports(const KernelCosts& rt, DeviceTime spacing) {
  std::vector<uint8_t> reported(rt.ns.size(), 0);
  DeviceTime since_report = 0;
  for (size_t k = 0; k < rt.ns.size(); ++k) {
    since_report += rt.ns[k];
    if (since_report >= spacing || k + 1 == rt.ns.size()) {
      reported[k] = 1;
      since_report = 0;
    }
  }
  return reported;
}

RtWindow estimated_rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now, double drift) {
  DeviceTime elapsed = now - since;
  while (!rt.reports(kernel) && elapsed >= rt.ns[static_cast<size_t>(kernel)]) {
    elapsed -= rt.ns[static_cast<size_t>(kernel)];
    ++kernel;
  }
  RtWindow w = rt_window(rt, kernel, now - elapsed, now);
  w.uncertainty_ns = static_cast<DeviceTime>(drift * static_cast<double>(now - since));
  return w;
}

bool fits_beside(const KernelCosts& be, int kernel, const RtWindow& window, DeviceTime launch_ns) {
  // An RT kernel past its profiled time ends at an unknown moment: nothing is planned beside it.
  if (window.rt == nullptr || window.remaining_ns <= 0) return false;
  const KernelCosts& rt = *window.rt;
  const DeviceTime need = launch_ns + be.ns[static_cast<size_t>(kernel)] + window.uncertainty_ns;
  const double share = be.share[static_cast<size_t>(kernel)] + window.padded_share;
  const auto first = static_cast<size_t>(window.kernel);
  const size_t end = std::min(rt.ns.size(), first + 1 + kPaddingLookahead);
  DeviceTime ends_in = window.remaining_ns;  // until RT kernel j starts, in the loop
  for (size_t j = first; j < end; ++j) {
    if (share + rt.share[j] > 1.0) return false;
    if (j > first) {
      if (ends_in >= need) return true;
      ends_in += rt.ns[j];
    }
  }
  // The task's last kernels: nothing after them to collide with.
  return end == rt.ns.size() && ends_in >= need;
}

// At add_client: a padding mode cannot plan without every client's profile, and says how to get one.
KernelCosts Scheduler::Impl::profiled_costs(const std::string& client, InstanceId instance) const {
  const ModelProfile* p = device.profile(instance);
  if (p == nullptr) {
    const Program& program = device.program(instance);
    ATOLL_THROW(kInvalidArgument,
                "mode {} needs a kernel profile of every client; client '{}' has none (atoll profile {} --batch {} "
                "--device {} --out FILE, then --profile FILE)",
                traits.name, client, program.model, program.batch, device.name());
  }
  return KernelCosts::from(*p);
}

// The running RT task's current kernel: estimated from the first one not seen to have ended,
// current since the scheduler first saw it so. Nothing fits once the task has no kernel left,
// or none runs.
RtWindow Scheduler::Impl::running_rt_window() {
  for (int i : rt_lanes) {
    Lane& l = lanes[static_cast<size_t>(i)];
    if (!l.task) continue;
    const Task& t = *l.task;
    const Client& c = client_of(l);
    if (t.cursor >= c.kernels) break;
    const DeviceTime now = device.now();
    if (l.seen_task != t.id || l.seen_kernel != t.cursor) {
      l.seen_task = t.id;
      l.seen_kernel = t.cursor;
      l.seen_since = now;
    }
    return estimated_rt_window(c.costs, t.cursor, l.seen_since, now, options.padding_drift);
  }
  return RtWindow{};
}

void Scheduler::Impl::pad_be_lanes() {
  RtWindow window = running_rt_window();
  if (window.rt == nullptr) return;
  for (const Lane& l : lanes) {
    if (!is_rt(client_of(l)) && l.completed < l.padded_through) window.padded_share += l.padded_share;
  }
  for (Lane& l : lanes) {
    if (is_rt(client_of(l))) continue;
    // A BE request that arrives while RT tasks run back to back is staged now, or it would
    // wait for the RT queue to empty (in RT mode top_up launches nothing for it).
    if (!l.task) start_next(l);
    pad(l, window);
  }
}

// Launches the lane's next kernel beside the RT task when the lane is idle and the kernel fits;
// the window then counts its SM share.
bool Scheduler::Impl::pad(Lane& l, RtWindow& window) {
  if (!l.task || l.cut_at != kNoCut || l.launched != l.completed) return false;
  Task& t = *l.task;
  const Client& c = client_of(l);
  if (t.error || t.next_launch >= c.kernels ||
      !fits_beside(c.costs, t.next_launch, window, options.padding_launch_ns)) {
    return false;
  }
  const bool first = t.next_launch == 0 && t.first_seq == 0;
  LaunchOptions lo;
  lo.preemptible = false;  // it ends within the RT kernel's time: the flag must not cut it
  lo.timed = first || t.next_launch == c.kernels - 1;
  uint64_t seq;
  try {
    seq = launch(l, c.instance, t.next_launch, lo);
  } catch (...) {
    t.error = std::current_exception();
    return false;
  }
  if (first) t.first_seq = seq;
  l.padded_through = seq;
  l.padded_share = c.costs.share[static_cast<size_t>(t.next_launch)];
  window.padded_share += l.padded_share;
  ++t.next_launch;
  ++stats.padded_kernels;
  return true;
}

}  // namespace atl::sched
