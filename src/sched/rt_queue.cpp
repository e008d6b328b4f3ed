// The RT queue (layout kRtQueue): an RT arrival enters RT mode, which stops BE launches and, in
// the preemptive modes, preempts BE work on the device; RT tasks then run one at a time, and BE
// work resumes once the queue is empty. In the padding modes BE kernels that fit run beside
// the RT task meanwhile (padding.cpp).
#include <algorithm>

#include "sched/scheduler_impl.h"

namespace atl::sched {

void Scheduler::Impl::enter_rt_mode(const std::vector<uint32_t>* words) {
  const DeviceTime at = device.now();
  rt_mode = true;
  int preempted = 0;
  for (size_t i = 0; i < lanes.size(); ++i) {
    Lane& l = lanes[i];
    if (is_rt(client_of(l)) || !l.task) continue;
    // Only the completion counter, read before the flag goes up, is needed here: errors, spans
    // and tasks that ended wait for the next poll (observe and settle on five BE lanes took
    // 12 us of the RT request's way, DISB C on the H200). Padded launches ignore the flag and
    // run to their end: only launches after them can be cut.
    const uint64_t ended = words ? device.completed_at(l.stream, (*words)[i]) : device.completed(l.stream);
    const uint64_t uncut = std::max(ended, l.padded_through);
    if (l.launched == uncut) continue;
    ++preempted;
    ++l.task->preemptions;
    if (traits.raises_flag) l.cut_at = uncut;
  }
  stats.preemptions += preempted;
  pending_preempted = preempted;
  record_event({SchedulerEvent::Kind::kRtModeEnter, at, preempted});
}

void Scheduler::Impl::leave_rt_mode() {
  for (const Lane& l : lanes) {
    if (l.cut_at != kNoCut) return;  // still draining: the flag must stay up
  }
  const DeviceTime at = device.now();
  if (flag_raised) {
    device.lower_flag();
    flag_raised = false;
  }
  rt_mode = false;
  record_event({SchedulerEvent::Kind::kRtModeLeave, at, 0});
}

void Scheduler::Impl::record_event(const SchedulerEvent& e) {
  if (!options.record_events || e.at >= options.events_until) return;
  if (e.at < options.events_from) events.clear();  // only the last before the window counts
  events.push_back(e);
}

bool Scheduler::Impl::rt_running() const {
  return std::any_of(rt_lanes.begin(), rt_lanes.end(),
                     [&](int i) { return lanes[static_cast<size_t>(i)].task != nullptr; });
}

// Starts the RT task on its client's lane: from the work already waiting there (armed), or by
// raising the flag (reset mode, BE work in flight) and launching its kernels.
void Scheduler::Impl::start_rt(TaskPtr t, DeviceTime opened_at) {
  t->started = opened_at >= 0 ? opened_at : device.now();
  Lane& l = lane_of(t->client);
  t->preempted_tasks = pending_preempted;
  pending_preempted = 0;
  if (armed) {
    start_armed(l, std::move(t), opened_at);
    return;
  }
  if (traits.raises_flag && t->preempted_tasks > 0 && !flag_raised) {
    device.raise_flag(l.stream);
    flag_raised = true;
  }
  bind(l, std::move(t));  // RT staging is never interrupted
}

// The arrival sentinel's opening, if it made one, goes first: its task already runs. Otherwise
// the gate closes before RT mode is entered, or the sentinel might open a second lane.
void Scheduler::Impl::start_next_rt() {
  take_opening();
  if (!opened) {
    if (rt_running() || !rt_queued()) return;
    if (!rt_mode && sentinel && (opened = sentinel->close())) enter_rt_mode(&opened->words);
  }
  if (opened) {
    start_opened();
    return;
  }
  if (!rt_mode) enter_rt_mode();
  start_rt(pop_rt());
}

// An RT request that can start starts before the BE lanes' completions are read: reading them
// (errors, spans, finished tasks and their callbacks) took 12 us with five BE lanes (DISB C).
void Scheduler::Impl::start_rt_first() {
  if (!rt_queued()) return;
  for (int i : rt_lanes) {
    Lane& l = lanes[static_cast<size_t>(i)];
    observe(l);
    settle(l);
  }
  start_next_rt();
}

void Scheduler::Impl::schedule_rt_queue() {
  for (;;) {
    start_next_rt();
    if (rt_mode && !rt_running() && !rt_queued()) leave_rt_mode();
    if (rt_mode) {
      // Lanes whose task ended are armed now rather than when RT mode ends, so the client's
      // next request starts from held work (SchedulerOptions::arm_behind_running).
      if (armed && !options.arm_behind_running) arm_idle_lanes();
      if (traits.pads_be) pad_be_lanes();
      return;
    }
    // Out of RT mode with every lane armed: the sentinel takes arrivals from here on, before the
    // BE launches below take host time. Published after them, an arrival meanwhile waited for
    // this thread (DISB E on the H200: up to 2 ms, where one launch call blocked).
    if (armed && !rt_queued() && rt_lanes_armed()) publish_openers();
    for (Lane& l : lanes) {
      if (!is_rt(client_of(l)) && !rt_queued()) feed(l);
    }
    // An RT client's first task is enqueued once BE work is on the device; later ones right
    // behind the task before them (start_armed).
    if (armed && !rt_queued()) {
      arm_idle_lanes();
      publish_openers();
    }
    // Launching BE kernels takes host time; an RT request that arrived meanwhile starts now
    // rather than after the next completion.
    if (!rt_queued()) return;
  }
}

}  // namespace atl::sched
