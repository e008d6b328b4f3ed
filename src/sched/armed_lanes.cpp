// Armed lanes: each RT client's next task waits on the device, enqueued on the client's own
// stream behind holds, so that an arrival costs host stores and no API call. In reset mode the
// first hold guards the flag write and the second the input upload and the kernels: the flag
// goes up at once, the inputs are staged while BE work drains, then the task runs.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/error.h"
#include "sched/scheduler_impl.h"

namespace atl::sched {

// Decided at the first poll, once every client's stream exists: a device may be able to keep
// only so many streams holding work without holding up the others (CUDA: hardware queues).
void Scheduler::Impl::decide_arming() {
  arming_decided = true;
  const bool wanted = traits.arms_rt && options.armed_rt && !rt_lanes.empty();
  if (!wanted) return;
  std::vector<StreamId> streams;
  for (int i : rt_lanes) streams.push_back(lanes[static_cast<size_t>(i)].stream);
  armed = device.can_hold() && device.holds_isolate(streams);
  if (!armed) {
    spdlog::warn(
        "scheduler: {} cannot hold work on {} RT streams without delaying other streams; RT tasks are "
        "launched on arrival",
        device.name(), rt_lanes.size());
  }
}

bool Scheduler::Impl::armable(const Lane& l) const {
  return armed && l.client >= 0 && is_rt(clients[static_cast<size_t>(l.client)]);
}

// Enqueues the start of the client's next task behind its holds. The launches are parked: not
// in flight until released.
void Scheduler::Impl::arm(Lane& l) {
  const Client& c = client_of(l);
  device.hold(l.stream);
  ++l.holds;
  if (traits.raises_flag) {
    device.raise_flag(l.stream);
    device.hold(l.stream);
    ++l.holds;
  }
  device.enqueue_inputs(c.instance, l.stream);
  if (single_launch(c)) {
    l.armed_seq = launch_rest(l, c, 0);
    l.parked += static_cast<uint64_t>(c.kernels);
    return;
  }
  const int armed_kernels = std::min(c.kernels, options.armed_kernels);
  for (int k = 0; k < armed_kernels; ++k) {
    LaunchOptions lo;
    lo.timed = k == 0 || k == c.kernels - 1;
    // The last armed kernel reports too: a task that fails at staging launches no more.
    // Padding follows the RT task by the kernels that report.
    lo.report = k == armed_kernels - 1 || (traits.pads_be && c.costs.reports(k));
    const uint64_t seq = launch(l, c.instance, k, lo);
    if (k == 0) l.armed_seq = seq;
    ++l.parked;
  }
}

void Scheduler::Impl::arm_idle_lanes() {
  for (int i : rt_lanes) {
    Lane& l = lanes[static_cast<size_t>(i)];
    if (!l.task && l.holds == 0) arm(l);
  }
}

void Scheduler::Impl::release_hold(Lane& l) {
  device.release(l.stream);
  --l.holds;
}

// Starts `t` from its client's armed lane. In reset mode the first release raises the flag
// before the host copies the inputs; the last starts the task.
void Scheduler::Impl::start_armed(Lane& l, TaskPtr t) {
  if (l.holds == 0) arm(l);  // the first request, or one right behind its predecessor
  if (traits.raises_flag) {
    release_hold(l);
    flag_raised = true;
  }
  const Client& c = client_of(l);
  try {
    device.stage_inputs(c.instance, t->request.inputs);
  } catch (...) {
    // The held task still runs (on the previous inputs) so the lane stays in step; its
    // result is dropped and the request fails.
    t->error = std::current_exception();
  }
  release_hold(l);
  t->dispatch = device.now();
  t->first_seq = l.armed_seq;
  t->next_launch = static_cast<int>(l.parked);
  l.base_seq = l.armed_seq;
  l.base_kernel = 0;
  l.parked = 0;
  l.task = std::move(t);
  ++stats.armed_rt_tasks;
  top_up(l);  // the kernels not armed
  // The client's next task goes in behind this one now: in the preemptive modes BE work is
  // stopped anyway and the host would only wait for the RT kernels; arming later would take
  // host time from BE work.
  arm(l);
  settle(l);
}

// Releases every armed lane's held work (it runs on stale inputs; nobody reads its outputs)
// and waits for it, so no held work outlives the scheduler: it would block the device.
void Scheduler::Impl::disarm() {
  bool released = false;
  for (int i : rt_lanes) {
    Lane& l = lanes[static_cast<size_t>(i)];
    if (l.holds == 0) continue;
    while (l.holds > 0) release_hold(l);
    device.synchronize(l.stream);
    l.completed = l.launched;
    l.parked = 0;
    released = true;
  }
  if ((released && traits.raises_flag) || flag_raised) {
    device.lower_flag();
    flag_raised = false;
  }
}

}  // namespace atl::sched
