// A run that makes no progress fails with a description of what the scheduler waits on, instead
// of hanging: a device that never ends a launch (held work blocking a hardware queue, a kernel
// that never returns) or a task no lane takes.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "sched/scheduler_impl.h"

namespace atl::sched {

void Scheduler::Impl::check_progress() {
  const DeviceTime now = device.now();
  const bool waiting =
      in_flight() || std::any_of(clients.begin(), clients.end(), [](const Client& c) { return !c.queue.empty(); });
  if (!waiting) {
    last_progress = now;
    return;
  }
  if (now - last_progress <= options.stall_timeout_ns) return;
  ATOLL_THROW(kInternal, "scheduler made no progress for {:.1f} s in mode {}: {}",
              static_cast<double>(now - last_progress) * 1e-9, traits.name, describe_wait());
}

std::string Scheduler::Impl::describe_wait() const {
  std::string s;
  auto add = [&](std::string part) { s += s.empty() ? part : "; " + part; };
  for (const Lane& l : lanes) {
    const uint64_t in_flight = l.launched - l.parked - l.completed;
    if (!l.task && in_flight == 0 && l.holds == 0) continue;
    std::string who =
        l.client < 0 ? "every client" : fmt::format("client '{}'", clients[static_cast<size_t>(l.client)].name);
    std::string what = l.task ? fmt::format("task {} at kernel {}", l.task->id, l.task->cursor) : "no task";
    add(fmt::format("stream {} ({}): {}, {} launches in flight, {} parked behind {} holds", l.stream, who, what,
                    in_flight, l.parked, l.holds));
  }
  size_t rt_waiting = 0, be_waiting = 0;
  for (const Client& c : clients) (is_rt(c) ? rt_waiting : be_waiting) += c.queue.size();
  add(fmt::format("{} RT and {} BE requests queued", rt_waiting, be_waiting));
  if (rt_mode) add("in RT mode");
  if (flag_raised) add("flag raised");
  return s;
}

}  // namespace atl::sched
