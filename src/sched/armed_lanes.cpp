// Armed lanes: each RT client's next task waits on the device, enqueued on the client's own
// stream behind holds, so that an arrival costs host stores and no API call. In reset mode the
// first hold guards the flag write and the second the input upload and the kernels: the flag
// goes up at once, the inputs are staged while BE work drains, then the task runs.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

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
  // The sentinel opens only lanes published to it; one armed meanwhile would be left out of its
  // openers, and the handshake assumes the scheduler arms only while the sentinel is closed.
  ATOLL_CHECK(!sentinel || sentinel->closed(), kInternal, "arming client {}'s lane while the arrival sentinel is open",
              l.client);
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

// Whether every RT lane without a task holds its client's next one (arm_idle_lanes has nothing
// to do).
bool Scheduler::Impl::rt_lanes_armed() const {
  return std::all_of(rt_lanes.begin(), rt_lanes.end(), [&](int i) {
    const Lane& l = lanes[static_cast<size_t>(i)];
    return l.task || l.holds > 0;
  });
}

void Scheduler::Impl::release_hold(Lane& l) {
  device.release(l.stream);
  --l.holds;
}

// Starts `t` from its client's armed lane. In reset mode the first release raises the flag
// before the host copies the inputs; the last starts the task. Where the arrival sentinel
// opened the lane already (opened_at), the releases write what is there and stage nothing.
void Scheduler::Impl::start_armed(Lane& l, TaskPtr t, DeviceTime opened_at) {
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
  t->dispatch = opened_at >= 0 ? opened_at : device.now();
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
  // host time from BE work. Otherwise it is armed once this one has ended (arm_idle_lanes).
  if (options.arm_behind_running) arm(l);
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

// ---- the arrival sentinel ----

void Scheduler::Impl::start_sentinel() {
  const bool wanted = options.arrival_sentinel && options.armed_rt && traits.arms_rt &&
                      traits.layout == LaneLayout::kRtQueue && !traits.pads_be && device.can_hold();
  if (!wanted || sentinel || lanes.empty()) return;
  // Its thread reads every lane's completion word, and a throw there would end the process: a
  // device without them (the simulator) gets no sentinel.
  try {
    device.completion_word(lanes.front().stream);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kUnsupported) throw;
    return;
  }
  std::vector<StreamId> watched;
  for (const Lane& l : lanes) watched.push_back(l.stream);
  auto made = std::make_unique<ArrivalSentinel>([this] { return device.now(); },
                                                [this](StreamId s) { return device.completion_word(s); },
                                                std::move(watched), options.rt_order == RtOrder::kDeadline,
                                                device.simulated_clock() ? 0 : options.sentinel.fifo_priority,
                                                options.sentinel.spin_words);
  std::lock_guard lock(inbox_mutex);  // submitters read `sentinel`
  sentinel = std::move(made);
}

// After the scheduler's thread has ended: an opening made meanwhile is taken over, for the next
// poll (or the teardown) to account for.
void Scheduler::Impl::stop_sentinel() {
  if (!sentinel) return;
  sentinel->stop();
  take_opening();
  sentinel->close();
  std::unique_ptr<ArrivalSentinel> gone;
  std::lock_guard lock(inbox_mutex);
  gone = std::move(sentinel);
}

// On the submitter's thread, with inbox_mutex held and `t` in the inbox.
void Scheduler::Impl::expect_arrival(const Task& t) {
  if (!sentinel) return;
  const Client& c = clients[static_cast<size_t>(t.client)];
  if (!is_rt(c) || t.request.arrival <= device.now()) return;
  if (!device.inputs_in_staging(c.instance, t.request.inputs)) return;
  sentinel->expect(t.request.arrival, t.request.deadline, t.id, t.client);
}

// While no RT task is queued or running: every armed idle RT lane may be opened at an arrival.
void Scheduler::Impl::publish_openers() {
  if (!sentinel || !armed || rt_mode || opened || rt_running() || rt_queued() || !sentinel->closed()) return;
  std::vector<std::optional<GateOpener>> openers(clients.size());
  for (int i : rt_lanes) {
    const Lane& l = lanes[static_cast<size_t>(i)];
    if (!l.task && l.holds > 0) openers[static_cast<size_t>(l.client)] = device.gate_opener(l.stream, l.holds);
  }
  sentinel->publish(std::move(openers), admitted_through);
}

void Scheduler::Impl::take_opening() {
  if (!sentinel || opened || !sentinel->claimed()) return;
  opened = sentinel->close();
  if (!opened) return;
  ATOLL_CHECK(!rt_mode, kInternal, "the arrival sentinel opened client {}'s lane in RT mode", opened->client);
  enter_rt_mode(&opened->words);
}

// The task the sentinel opened for: it has arrived (the sentinel opened at its arrival).
void Scheduler::Impl::start_opened() {
  admit();
  const ArrivalSentinel::Opening o = *std::exchange(opened, std::nullopt);
  Client& c = clients[static_cast<size_t>(o.client)];
  const auto it = std::find_if(c.queue.begin(), c.queue.end(), [&](const TaskPtr& t) { return t->id == o.task; });
  if (it == c.queue.end()) {
    // Answered meanwhile (a failed run): the opened work runs out unread, and the flag it
    // raised comes down when RT mode ends.
    Lane& l = lane_of(o.client);
    flag_raised = flag_raised || traits.raises_flag;
    while (l.holds > 0) release_hold(l);
    device.synchronize(l.stream);
    l.completed = l.launched;
    l.parked = 0;
    return;
  }
  TaskPtr t = std::move(*it);
  c.queue.erase(it);
  t->admitted = o.at;  // the sentinel admitted it
  t->by_sentinel = true;
  t->sentinel_reached = o.reached;
  t->sentinel_claimed = o.claimed;
  ++stats.sentinel_rt_tasks;
  start_rt(std::move(t), o.at);
}

}  // namespace atl::sched
