#include "sched/scheduler.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "sched/scheduler_impl.h"

namespace atl::sched {

std::exception_ptr make_scheduler_error(ErrorCode code, std::string message) {
  return std::make_exception_ptr(Error(code, std::move(message), __FILE__, __LINE__));
}

Scheduler::Impl::Impl(ExecDevice& d, const SchedulerOptions& o)
    : device(d), options(o), traits(mode_traits(o.mode)), padding_guard(o.padding_rt_budget) {
  ATOLL_CHECK(options.inflight_cap >= 1, kInvalidArgument, "in-flight cap must be at least 1 (got {})",
              options.inflight_cap);
  ATOLL_CHECK(options.be_queue_ns >= 0, kInvalidArgument, "BE queue time must not be negative (got {} ns)",
              options.be_queue_ns);
  ATOLL_CHECK(options.idle_poll_ns >= 1, kInvalidArgument, "idle poll must be at least 1 ns (got {})",
              options.idle_poll_ns);
  ATOLL_CHECK(options.armed_kernels >= 1, kInvalidArgument, "armed kernels must be at least 1 (got {})",
              options.armed_kernels);
  ATOLL_CHECK(options.stall_timeout_ns >= 1, kInvalidArgument, "stall timeout must be positive (got {} ns)",
              options.stall_timeout_ns);
  ATOLL_CHECK(options.padding_resync_ns >= 0, kInvalidArgument,
              "padding resync spacing must not be negative (got {} ns)", options.padding_resync_ns);
  ATOLL_CHECK(options.padding_drift >= 0 && options.padding_drift < 1, kInvalidArgument,
              "padding drift must be in [0, 1) (got {})", options.padding_drift);
  ATOLL_CHECK(options.padding_rt_budget >= 0 && options.padding_rt_budget < 1, kInvalidArgument,
              "padding RT budget must be in [0, 1) (got {})", options.padding_rt_budget);
  ATOLL_CHECK(options.padding_launch_ns >= 0, kInvalidArgument, "padding launch time must not be negative (got {} ns)",
              options.padding_launch_ns);
  if (traits.layout == LaneLayout::kOneLane) add_lane(-1, StreamPriority::kLow);
}

int Scheduler::Impl::add_lane(ClientId client, StreamPriority priority) {
  Lane l;
  l.stream = device.create_stream(priority);
  l.client = client;
  lanes.push_back(std::move(l));
  return static_cast<int>(lanes.size()) - 1;
}

ClientId Scheduler::Impl::add_client(TaskClass task_class, std::string name, InstanceId instance) {
  ATOLL_CHECK(!in_poll, kInvalidArgument, "clients cannot be added from a completion callback");
  ATOLL_CHECK(!arming_decided, kInvalidArgument, "clients must be added before the scheduler first runs");
  for (const Client& c : clients) {
    ATOLL_CHECK(c.instance != instance, kInvalidArgument, "instance {} already serves client '{}'", instance, c.name);
  }
  const Program& program = device.program(instance);
  const int kernels = static_cast<int>(program.kernels.size());
  // Resuming a preempted task re-runs up to `inflight_cap` kernels; the planner must have kept
  // their inputs apart from what the kernels after them write.
  ATOLL_CHECK(task_class == TaskClass::kRealTime || options.inflight_cap <= program.inflight_window, kInvalidArgument,
              "client '{}': in-flight cap {} exceeds the program's in-flight window {} (compile with "
              "CompileOptions::inflight_window >= the cap)",
              name, options.inflight_cap, program.inflight_window);
  const ClientId id = static_cast<ClientId>(clients.size());
  KernelCosts costs = traits.pads_be ? profiled_costs(name, instance) : KernelCosts{};
  if (traits.pads_be && task_class == TaskClass::kRealTime) {
    // One launch per task reports only its end (every 13-20% of an RT task's time went to
    // per-kernel launches and reports on the H200; the H200's 7.8 us launches make a task of
    // 150 kernels host-bound).
    const DeviceTime spacing =
        options.rt_single_launch ? std::numeric_limits<DeviceTime>::max() : options.padding_resync_ns;
    costs.reported = padding_reports(costs, spacing);
  }
  clients.push_back(Client{std::move(name), task_class, instance, kernels, {}, -1, std::move(costs)});
  const bool rt = task_class == TaskClass::kRealTime;
  if (traits.layout != LaneLayout::kOneLane) {
    const bool high = rt && traits.rt_high_priority;
    clients.back().lane = add_lane(id, high ? StreamPriority::kHigh : StreamPriority::kLow);
    if (rt) rt_lanes.push_back(clients.back().lane);
  }
  return id;
}

uint64_t Scheduler::Impl::enqueue(ClientId client, Request request, Completion done, std::future<TaskResult>* future) {
  ATOLL_CHECK(client >= 0 && client < static_cast<int>(clients.size()), kInvalidArgument,
              "unknown client {} ({} registered)", client, clients.size());
  auto t = std::make_unique<Task>();
  t->client = client;
  t->request = std::move(request);
  t->done = std::move(done);
  if (future != nullptr) *future = t->promise.get_future();
  std::lock_guard lock(inbox_mutex);
  t->id = next_id++;
  const uint64_t id = t->id;
  inbox.push_back(std::move(t));
  expect_arrival(*inbox.back());
  return id;
}

// ---- admission ----

void Scheduler::Impl::take_inbox() {
  std::vector<TaskPtr> batch;
  {
    std::lock_guard lock(inbox_mutex);
    batch.swap(inbox);
  }
  if (batch.empty()) return;
  const DeviceTime now = device.now();
  for (TaskPtr& t : batch) {
    if (t->request.arrival == kArriveOnAdmission) t->request.arrival = now;
    pending.push_back(std::move(t));
    std::push_heap(pending.begin(), pending.end(), &Impl::arrives_later);
  }
}

void Scheduler::Impl::admit() {
  take_inbox();
  const DeviceTime now = device.now();
  admitted_through = now;
  while (!pending.empty() && pending.front()->request.arrival <= now) {
    std::pop_heap(pending.begin(), pending.end(), &Impl::arrives_later);
    TaskPtr t = std::move(pending.back());
    pending.pop_back();
    t->admitted = now;
    Client& c = clients[static_cast<size_t>(t->client)];
    if (!traits.admits_be && !is_rt(c)) {
      t->error =
          make_scheduler_error(ErrorCode::kInvalidArgument,
                               fmt::format("mode {} serves RT requests only; request {} of BE client '{}' refused",
                                           traits.name, t->id, c.name));
      deliver(std::move(t), {}, now);
      continue;
    }
    c.queue.push_back(std::move(t));
  }
}

DeviceTime Scheduler::Impl::next_arrival() {
  take_inbox();
  return pending.empty() ? kNever : pending.front()->request.arrival;
}

// ---- choosing tasks ----

Scheduler::Impl::TaskPtr Scheduler::Impl::pop_front(Client& c) {
  TaskPtr t = std::move(c.queue.front());
  c.queue.pop_front();
  return t;
}

bool Scheduler::Impl::rt_queued() const {
  return std::any_of(clients.begin(), clients.end(), [&](const Client& c) { return is_rt(c) && !c.queue.empty(); });
}

// The RT queue: the head of every RT client's queue, in arrival (then submission) order, or by
// earliest deadline.
Scheduler::Impl::TaskPtr Scheduler::Impl::pop_rt() {
  Client* best = nullptr;
  auto key = [&](const Task& t) {
    return std::make_tuple(options.rt_order == RtOrder::kDeadline ? t.request.deadline : t.request.arrival,
                           t.request.arrival, t.id);
  };
  for (Client& c : clients) {
    if (!is_rt(c) || c.queue.empty()) continue;
    if (best == nullptr || key(*c.queue.front()) < key(*best->queue.front())) best = &c;
  }
  return best == nullptr ? nullptr : pop_front(*best);
}

Scheduler::Impl::TaskPtr Scheduler::Impl::pop_be_round_robin() {
  for (size_t i = 0; i < clients.size(); ++i) {
    const size_t c = (next_be_client + i) % clients.size();
    if (is_rt(clients[c]) || clients[c].queue.empty()) continue;
    next_be_client = c + 1;
    return pop_front(clients[c]);
  }
  return nullptr;
}

Scheduler::Impl::TaskPtr Scheduler::Impl::next_task_for(const Lane& l) {
  if (l.client < 0) {  // seq: RT first
    TaskPtr t = pop_rt();
    return t ? std::move(t) : pop_be_round_robin();
  }
  Client& c = clients[static_cast<size_t>(l.client)];
  return c.queue.empty() ? nullptr : pop_front(c);
}

// ---- running tasks ----

// Stages the task's inputs and hands the device its first kernels. Staging a BE request's
// inputs takes host time; in the preemptive modes an RT arrival interrupts it, and the BE
// request goes back to the head of its queue (false).
bool Scheduler::Impl::bind(Lane& l, TaskPtr t) {
  Client& c = clients[static_cast<size_t>(t->client)];
  std::function<bool()> yield;
  if (traits.preemptive && !is_rt(c)) {
    yield = [this] {
      admit();
      return rt_queued();
    };
  }
  try {
    if (!device.write_inputs(c.instance, l.stream, t->request.inputs, yield)) {
      ++stats.interrupted_stagings;
      c.queue.push_front(std::move(t));
      return false;
    }
  } catch (...) {
    t->error = std::current_exception();
    deliver(std::move(t), {}, device.now());
    return true;
  }
  if (t->dispatch < 0) t->dispatch = device.now();
  l.task = std::move(t);
  l.base_seq = l.launched + 1;
  l.base_kernel = 0;
  top_up(l);
  settle(l);
  return true;
}

void Scheduler::Impl::start_next(Lane& l) {
  while (!l.task) {
    if (armable(l)) {
      Client& c = client_of(l);
      if (!c.queue.empty()) start_armed(l, pop_front(c), -1);
      return;
    }
    TaskPtr t = next_task_for(l);
    if (!t || !bind(l, std::move(t))) return;
  }
}

// Hands the device the bound task's next kernels. A BE task has at most `inflight_cap` on the
// device, which bounds both what a reset must drain and the host time one poll spends
// launching; an RT task gets all of its kernels at once.
void Scheduler::Impl::top_up(Lane& l) {
  Task& t = *l.task;
  if (t.error || l.cut_at != kNoCut) return;
  const Client& c = clients[static_cast<size_t>(t.client)];
  if (rt_mode && !is_rt(c)) return;  // RT mode stops BE launches (padding launches apart)
  if (single_launch(c) && t.next_launch < c.kernels) {
    const bool first = t.next_launch == 0 && t.first_seq == 0;
    try {
      const uint64_t first_seq = launch_rest(l, c, t.next_launch);
      if (first) t.first_seq = first_seq;
    } catch (...) {
      t.error = std::current_exception();
      return;
    }
    t.next_launch = c.kernels;
    return;
  }
  const uint64_t cap = is_rt(c) ? UINT64_MAX : be_cap(l);
  while (t.next_launch < c.kernels && l.launched - l.completed < cap) {
    if (yield_to_rt(c)) return;
    const bool first = t.next_launch == 0 && t.first_seq == 0;
    LaunchOptions lo;
    lo.preemptible = !is_rt(c);
    lo.timed = first || t.next_launch == c.kernels - 1;
    // An RT task is never rolled back: only its last kernel's end matters, except to padding,
    // which follows the RT task by the kernels that report.
    lo.report = lo.preemptible || t.next_launch == c.kernels - 1 || (traits.pads_be && c.costs.reports(t.next_launch));
    uint64_t seq;
    try {
      seq = launch_next(l, t, c, lo);
    } catch (...) {
      t.error = std::current_exception();
      return;
    }
    if (first) t.first_seq = seq;
    ++t.next_launch;
  }
}

// Launches that end back to back, each started when the one before it ended, are spaced by their
// kernel time. Preemptions (kernels exiting early) and idle gaps give no sample.
void Scheduler::Impl::time_be_kernels(Lane& l, uint64_t completed) {
  const DeviceTime now = device.now();
  if (rt_mode || l.cut_at != kNoCut) {
    l.ended_at = -1;
    return;
  }
  const uint64_t ended = completed - l.completed;
  if (l.ended_at >= 0 && l.backlog >= ended) {
    const DeviceTime sample = (now - l.ended_at) / static_cast<DeviceTime>(ended);
    l.kernel_ns = l.kernel_ns == 0 ? sample : (3 * l.kernel_ns + sample) / 4;
  }
  l.ended_at = now;
  l.backlog = l.launched - completed;
}

uint64_t Scheduler::Impl::be_cap(const Lane& l) const {
  const auto cap = static_cast<uint64_t>(options.inflight_cap);
  if (options.be_queue_ns <= 0 || l.kernel_ns <= 0 || cap <= 2) return cap;
  const auto queued = static_cast<uint64_t>((options.be_queue_ns + l.kernel_ns - 1) / l.kernel_ns);
  return std::clamp<uint64_t>(1 + queued, 2, cap);
}

// Hands the device one kernel on the lane's stream and counts it.
uint64_t Scheduler::Impl::launch(Lane& l, InstanceId instance, int kernel, const LaunchOptions& lo) {
  const uint64_t seq = device.launch(l.stream, instance, kernel, lo);
  ATOLL_CHECK(seq == l.launched + 1, kInternal, "stream {} returned launch {} after {}: another user shares it",
              l.stream, seq, l.launched);
  l.launched = seq;
  ++stats.kernel_launches;
  return seq;
}

uint64_t Scheduler::Impl::launch_slice(Lane& l, InstanceId instance, int kernel, const KernelSlice& slice,
                                       const LaunchOptions& lo) {
  const uint64_t seq = device.launch_slice(l.stream, instance, kernel, slice, lo);
  ATOLL_CHECK(seq == l.launched + 1, kInternal, "stream {} returned launch {} after {}: another user shares it",
              l.stream, seq, l.launched);
  l.launched = seq;
  ++stats.kernel_launches;
  return seq;
}

uint64_t Scheduler::Impl::launch_next(Lane& l, const Task& t, const Client& c, const LaunchOptions& lo) {
  const int64_t done = t.units_done(t.next_launch);
  if (done == 0) return launch(l, c.instance, t.next_launch, lo);
  const int64_t units = c.costs.units[static_cast<size_t>(t.next_launch)];
  return launch_slice(l, c.instance, t.next_launch, KernelSlice{done, units, 0}, lo);
}

uint64_t Scheduler::Impl::launch_rest(Lane& l, const Client& c, int first) {
  LaunchOptions lo;
  lo.timed = true;  // the task's start and end; never preemptible, its end reported
  const uint64_t last = device.launch_range(l.stream, c.instance, first, lo);
  const auto count = static_cast<uint64_t>(c.kernels - first);
  ATOLL_CHECK(last == l.launched + count, kInternal, "stream {} returned launch {} after {} for {} kernels", l.stream,
              last, l.launched, count);
  l.launched = last;
  stats.kernel_launches += static_cast<int64_t>(count);
  return last - count + 1;
}

bool Scheduler::Impl::single_launch(const Client& c) const {
  return options.rt_single_launch && is_rt(c);
}

// In the preemptive modes a BE launch loop stops as soon as an RT request has arrived.
bool Scheduler::Impl::yield_to_rt(const Client& c) {
  if (!traits.preemptive || is_rt(c)) return false;
  admit();
  return rt_queued();
}

// Keeps a lane busy: binds the next task, or hands the bound one more kernels.
void Scheduler::Impl::feed(Lane& l) {
  if (!l.task) {
    start_next(l);
    return;
  }
  top_up(l);
  settle(l);
}

// Reads the lane's completion counter and moves the cursor.
void Scheduler::Impl::observe(Lane& l) {
  if (!l.task) return;
  const uint64_t c = device.completed(l.stream);
  const bool be_task = !is_rt(task_client(l));
  if (sentinel && be_task) {
    // Read after the count: a sentinel that had not claimed by now had not raised the flag
    // when the count was read (ArrivalSentinel).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    take_opening();
  }
  if (c == l.completed) return;
  ATOLL_CHECK(c > l.completed && c <= l.launched, kInternal,
              "stream {} reports {} launches ended; {} were seen ended and {} issued", l.stream, c, l.completed,
              l.launched);
  if (options.be_queue_ns > 0 && be_task) time_be_kernels(l, c);
  l.completed = c;
  note_progress();
  Task& t = *l.task;
  // A stream's error query costs ~2 us of host time (cudaStreamQuery; 481 k of them in 15 s of
  // DISB C on the H200), so it is asked once the lane has drained, before settle() finishes or
  // rolls back its task: a failed task runs its launched kernels out, and no result is
  // delivered unchecked.
  if (c == l.launched - l.parked) {
    if (std::exception_ptr e = device.take_error(l.stream); e && !t.error) t.error = e;
  }
  if (t.start < 0 && t.first_seq != 0 && c >= t.first_seq) {
    const auto span = device.launch_span(l.stream, t.first_seq);
    t.start = span ? span->start : device.now();
  }
  const uint64_t known = std::min(c, l.cut_at);
  t.cursor = std::max(t.cursor, l.base_kernel + static_cast<int>(known - (l.base_seq - 1)));
}

// A drained lane rolls a reset task back to its first unfinished kernel, or finishes the task.
void Scheduler::Impl::settle(Lane& l) {
  if (!l.task || l.completed != l.launched - l.parked) return;
  Task& t = *l.task;
  if (l.cut_at != kNoCut) {
    stats.relaunched_kernels += static_cast<int64_t>(l.launched - l.cut_at);
    l.cut_at = kNoCut;
    t.next_launch = t.cursor;
    l.base_seq = l.launched + 1;
    l.base_kernel = t.cursor;
  }
  if (t.error || t.cursor == clients[static_cast<size_t>(t.client)].kernels) finish(l);
}

void Scheduler::Impl::finish(Lane& l) {
  TaskPtr t = std::move(l.task);
  DeviceTime end = device.now();
  std::vector<Tensor> outputs;
  if (!t->error) {
    if (const auto span = device.launch_span(l.stream, l.launched - l.parked)) end = span->end;
    try {
      outputs = device.read_outputs(clients[static_cast<size_t>(t->client)].instance, l.stream);
    } catch (...) {
      t->error = std::current_exception();
    }
  }
  deliver(std::move(t), std::move(outputs), end);
}

void Scheduler::Impl::deliver(TaskPtr t, std::vector<Tensor> outputs, DeviceTime end) {
  note_progress();
  TaskResult r;
  r.id = t->id;
  r.client = t->client;
  r.task_class = clients[static_cast<size_t>(t->client)].task_class;
  r.outputs = std::move(outputs);
  r.arrival = t->request.arrival;
  r.finish = end;
  r.start = t->start >= 0 ? t->start : end;
  r.dispatch = t->dispatch >= 0 ? t->dispatch : r.start;
  r.admitted = t->admitted >= 0 ? t->admitted : r.dispatch;
  r.started = t->started >= 0 ? t->started : r.dispatch;
  r.by_sentinel = t->by_sentinel;
  r.sentinel_reached = t->sentinel_reached;
  r.sentinel_claimed = t->sentinel_claimed;
  r.preemptions = t->preemptions;
  r.preempted_tasks = t->preempted_tasks;
  if (t->error) {
    ++stats.failed;
  } else if (r.task_class == TaskClass::kRealTime) {
    ++stats.rt_completed;
    if (traits.pads_be) padding_guard.record(t->client, r.finish - r.start, t->padded_beside);
  } else {
    ++stats.be_completed;
  }
  if (t->done) {
    t->done(t->error, std::move(r));
  } else if (t->error) {
    t->promise.set_exception(t->error);
  } else {
    t->promise.set_value(std::move(r));
  }
}

// ---- the step ----

const char* poll_phase_name(PollPhase phase) {
  switch (phase) {
    case PollPhase::kAdmit: return "admit";
    case PollPhase::kComplete: return "complete";
    case PollPhase::kLaunch: return "launch";
    case PollPhase::kArm: return "arm";
  }
  return "?";
}

void PollStats::add(const DeviceTime (&phase_ns)[4]) {
  const DeviceTime total = phase_ns[0] + phase_ns[1] + phase_ns[2] + phase_ns[3];
  ++count;
  over_50us += total > 50'000 ? 1 : 0;
  if (total <= longest_ns) return;
  longest_ns = total;
  longest_phase = static_cast<PollPhase>(std::max_element(phase_ns, phase_ns + 4) - phase_ns);
}

void Scheduler::Impl::poll() {
  in_poll = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{in_poll};
  DeviceTime mark = device.now();
  DeviceTime phase_ns[4] = {0, 0, 0, 0};
  const auto lap = [&](PollPhase phase) {
    const DeviceTime now = device.now();
    phase_ns[static_cast<int>(phase)] += now - mark;
    mark = now;
  };
  if (!arming_decided) {
    decide_arming();
    note_progress();
  }
  admit();
  lap(PollPhase::kAdmit);
  if (traits.layout == LaneLayout::kRtQueue) {
    start_rt_first();
    lap(PollPhase::kLaunch);
  }
  for (Lane& l : lanes) {
    observe(l);
    settle(l);
    // A finished BE task's callback and the next lane's reads take microseconds each (five BE
    // lanes: up to 17 us at p99 before an arrival was admitted, DISB C on the H200).
    if (traits.layout == LaneLayout::kRtQueue) {
      admit();
      start_rt_first();
    }
  }
  lap(PollPhase::kComplete);
  admit();  // completion callbacks may have submitted
  lap(PollPhase::kAdmit);
  if (traits.layout == LaneLayout::kRtQueue) {
    schedule_rt_queue();
    lap(PollPhase::kLaunch);
  } else {
    for (Lane& l : lanes) feed(l);
    lap(PollPhase::kLaunch);
    if (armed) arm_idle_lanes();
    lap(PollPhase::kArm);
  }
  check_progress();
  stats.polls.add(phase_ns);
}

bool Scheduler::Impl::in_flight() const {
  return std::any_of(lanes.begin(), lanes.end(), [](const Lane& l) { return l.launched - l.parked != l.completed; });
}

bool Scheduler::Impl::has_work() {
  {
    std::lock_guard lock(inbox_mutex);
    if (!inbox.empty()) return true;
  }
  if (!pending.empty()) return true;
  for (const Client& c : clients) {
    if (!c.queue.empty()) return true;
  }
  return std::any_of(lanes.begin(), lanes.end(), [](const Lane& l) { return l.task != nullptr; });
}

// Answers every request not yet answered with `error`.
void Scheduler::Impl::fail_all(const std::exception_ptr& error) {
  take_inbox();
  std::vector<TaskPtr> all = std::move(pending);
  pending.clear();
  for (Client& c : clients) {
    while (!c.queue.empty()) all.push_back(pop_front(c));
  }
  for (Lane& l : lanes) {
    if (l.task) all.push_back(std::move(l.task));
  }
  const DeviceTime now = device.now();
  for (TaskPtr& t : all) {
    t->error = error;
    deliver(std::move(t), {}, now);
  }
}

}  // namespace atl::sched
