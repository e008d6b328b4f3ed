#include "sched/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/error.h"

namespace atl::sched {

const char* task_class_name(TaskClass c) {
  return c == TaskClass::kRealTime ? "rt" : "be";
}

namespace {

struct ModeName {
  Mode mode;
  const char* name;
};
constexpr ModeName kModes[] = {{Mode::kRtOnly, "rt-only"},           {Mode::kSeq, "seq"},   {Mode::kStreams, "streams"},
                               {Mode::kStreamsPrio, "streams-prio"}, {Mode::kWait, "wait"}, {Mode::kReset, "reset"}};

constexpr uint64_t kNoCut = UINT64_MAX;

std::exception_ptr make_error(ErrorCode code, std::string message) {
  return std::make_exception_ptr(Error(code, std::move(message), __FILE__, __LINE__));
}

}  // namespace

const char* mode_name(Mode m) {
  for (const auto& e : kModes) {
    if (e.mode == m) return e.name;
  }
  return "unknown";
}

Mode mode_from_name(std::string_view name) {
  std::string valid;
  for (const auto& e : kModes) {
    if (name == e.name) return e.mode;
    valid += valid.empty() ? e.name : fmt::format(", {}", e.name);
  }
  ATOLL_THROW(kInvalidArgument, "unknown scheduling mode '{}' (modes: {})", name, valid);
}

bool arms_rt_tasks(const SchedulerOptions& options, const ExecDevice& device) {
  return options.mode == Mode::kReset && options.armed_rt && device.can_hold();
}

std::vector<Mode> all_modes() {
  std::vector<Mode> modes;
  for (const auto& e : kModes) modes.push_back(e.mode);
  return modes;
}

struct Scheduler::Impl {
  struct Task {
    uint64_t id = 0;
    ClientId client = -1;
    Request request;
    int cursor = 0;          // first kernel not known to have completed
    int next_launch = 0;     // next kernel to hand to the device
    uint64_t first_seq = 0;  // launch of kernel 0 on the first attempt; 0 before it
    DeviceTime dispatch = -1;
    DeviceTime start = -1;
    int preemptions = 0;
    int preempted_tasks = 0;
    std::exception_ptr error;
    Completion done;                   // callback submissions
    std::promise<TaskResult> promise;  // future submissions (done is empty)
  };
  using TaskPtr = std::unique_ptr<Task>;

  struct Client {
    std::string name;
    TaskClass task_class;
    InstanceId instance;
    int kernels;
    std::deque<TaskPtr> queue;  // arrived and not started, in arrival order
  };

  // A device stream and its virtual host queue: the unlaunched kernels of the bound task.
  struct Lane {
    // kRtClient: one RT client's armed lane (SchedulerOptions::armed_rt).
    enum class Source : uint8_t { kRtQueue, kRtClient, kClient, kAny };
    StreamId stream = -1;
    Source source = Source::kAny;
    ClientId client = -1;
    TaskPtr task;
    uint64_t launched = 0;   // launches issued on the stream
    uint64_t completed = 0;  // launches seen to have ended
    // Launch base_seq ran kernel base_kernel; the launches after it ran the kernels after it.
    uint64_t base_seq = 1;
    int base_kernel = 0;
    // The completed count read just before the flag went up. Launches after it may have exited
    // early, so they count as unfinished until the lane drains and rolls back. kNoCut otherwise.
    uint64_t cut_at = kNoCut;
    // Armed lanes: launches enqueued for the next task behind `holds` pending holds (the first
    // raises the flag, the second uploads the inputs and runs the kernels); `parked` of them are
    // not in flight until released, the first being launch `armed_seq`.
    int holds = 0;
    uint64_t parked = 0;
    uint64_t armed_seq = 0;
  };

  Impl(ExecDevice& d, const SchedulerOptions& o) : device(d), options(o), armed(arms_rt_tasks(o, d)) {
    ATOLL_CHECK(options.inflight_cap >= 1, kInvalidArgument, "in-flight cap must be at least 1 (got {})",
                options.inflight_cap);
    ATOLL_CHECK(options.idle_poll_ns >= 1, kInvalidArgument, "idle poll must be at least 1 ns (got {})",
                options.idle_poll_ns);
    switch (options.mode) {
      case Mode::kSeq:
        add_lane(Lane::Source::kAny, -1, StreamPriority::kLow);
        break;
      case Mode::kRtOnly:
      case Mode::kWait:
      case Mode::kReset:
        if (!armed) rt_lanes.push_back(add_lane(Lane::Source::kRtQueue, -1, StreamPriority::kHigh));
        break;
      case Mode::kStreams:
      case Mode::kStreamsPrio:
        break;
    }
  }

  bool preemptive() const { return options.mode == Mode::kWait || options.mode == Mode::kReset; }

  int add_lane(Lane::Source source, ClientId client, StreamPriority priority) {
    Lane l;
    l.stream = device.create_stream(priority);
    l.source = source;
    l.client = client;
    lanes.push_back(std::move(l));
    return static_cast<int>(lanes.size()) - 1;
  }

  ClientId add_client(TaskClass task_class, std::string name, InstanceId instance) {
    ATOLL_CHECK(!in_poll, kInvalidArgument, "clients cannot be added from a completion callback");
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
    clients.push_back(Client{std::move(name), task_class, instance, kernels, {}});
    const bool rt = task_class == TaskClass::kRealTime;
    if (options.mode == Mode::kStreams || options.mode == Mode::kStreamsPrio) {
      const bool high = rt && options.mode == Mode::kStreamsPrio;
      add_lane(Lane::Source::kClient, id, high ? StreamPriority::kHigh : StreamPriority::kLow);
    } else if (preemptive() && !rt) {
      add_lane(Lane::Source::kClient, id, StreamPriority::kLow);
    } else if (armed && rt) {
      rt_lane_of.resize(clients.size(), -1);
      rt_lane_of[static_cast<size_t>(id)] = add_lane(Lane::Source::kRtClient, id, StreamPriority::kHigh);
      rt_lanes.push_back(rt_lane_of[static_cast<size_t>(id)]);
    }
    return id;
  }

  uint64_t enqueue(ClientId client, Request request, Completion done, std::future<TaskResult>* future) {
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
    return id;
  }

  // ---- admission ----

  static bool arrives_later(const TaskPtr& a, const TaskPtr& b) {
    return std::tie(a->request.arrival, a->id) > std::tie(b->request.arrival, b->id);
  }

  void take_inbox() {
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
      std::push_heap(pending.begin(), pending.end(), arrives_later);
    }
  }

  void admit() {
    take_inbox();
    const DeviceTime now = device.now();
    while (!pending.empty() && pending.front()->request.arrival <= now) {
      std::pop_heap(pending.begin(), pending.end(), arrives_later);
      TaskPtr t = std::move(pending.back());
      pending.pop_back();
      Client& c = clients[static_cast<size_t>(t->client)];
      if (options.mode == Mode::kRtOnly && c.task_class == TaskClass::kBestEffort) {
        t->error = make_error(
            ErrorCode::kInvalidArgument,
            fmt::format("mode rt-only serves RT requests only; request {} of BE client '{}' refused", t->id, c.name));
        deliver(std::move(t), {}, now);
        continue;
      }
      c.queue.push_back(std::move(t));
    }
  }

  DeviceTime next_arrival() {
    take_inbox();
    return pending.empty() ? kNever : pending.front()->request.arrival;
  }

  // ---- choosing tasks ----

  TaskPtr pop_front(Client& c) {
    TaskPtr t = std::move(c.queue.front());
    c.queue.pop_front();
    return t;
  }

  bool rt_queued() const {
    return std::any_of(clients.begin(), clients.end(),
                       [](const Client& c) { return c.task_class == TaskClass::kRealTime && !c.queue.empty(); });
  }

  TaskPtr pop_rt() {
    Client* best = nullptr;
    auto key = [&](const Task& t) {
      return std::make_tuple(options.rt_order == RtOrder::kDeadline ? t.request.deadline : t.request.arrival,
                             t.request.arrival, t.id);
    };
    for (Client& c : clients) {
      if (c.task_class != TaskClass::kRealTime || c.queue.empty()) continue;
      if (best == nullptr || key(*c.queue.front()) < key(*best->queue.front())) best = &c;
    }
    return best == nullptr ? nullptr : pop_front(*best);
  }

  TaskPtr pop_be_round_robin() {
    for (size_t i = 0; i < clients.size(); ++i) {
      const size_t c = (next_be_client + i) % clients.size();
      if (clients[c].task_class != TaskClass::kBestEffort || clients[c].queue.empty()) continue;
      next_be_client = c + 1;
      return pop_front(clients[c]);
    }
    return nullptr;
  }

  TaskPtr next_task_for(const Lane& l) {
    switch (l.source) {
      case Lane::Source::kRtQueue:
        return pop_rt();
      case Lane::Source::kRtClient:  // started by start_armed_rt, never fed
        return nullptr;
      case Lane::Source::kClient: {
        Client& c = clients[static_cast<size_t>(l.client)];
        return c.queue.empty() ? nullptr : pop_front(c);
      }
      case Lane::Source::kAny: {
        TaskPtr t = pop_rt();
        return t ? std::move(t) : pop_be_round_robin();
      }
    }
    return nullptr;
  }

  // ---- running tasks ----

  void start_next(Lane& l) {
    while (!l.task) {
      TaskPtr t = next_task_for(l);
      if (!t) return;
      if (l.source == Lane::Source::kRtQueue) {
        t->preempted_tasks = pending_preempted;
        pending_preempted = 0;
      }
      Client& c = clients[static_cast<size_t>(t->client)];
      // Staging a BE request's inputs takes host time; an RT arrival interrupts it, and the BE
      // request waits at the head of its queue.
      std::function<bool()> yield;
      if (preemptive() && c.task_class == TaskClass::kBestEffort) {
        yield = [this] {
          admit();
          return rt_queued();
        };
      }
      try {
        if (!device.write_inputs(c.instance, l.stream, t->request.inputs, yield)) {
          ++stats.interrupted_stagings;
          c.queue.push_front(std::move(t));
          return;
        }
      } catch (...) {
        t->error = std::current_exception();
        deliver(std::move(t), {}, device.now());
        continue;
      }
      if (t->dispatch < 0) t->dispatch = device.now();
      l.task = std::move(t);
      l.base_seq = l.launched + 1;
      l.base_kernel = 0;
      top_up(l);
      settle(l);
    }
  }

  // Hands the device the bound task's next kernels. A BE task has at most `inflight_cap` on the
  // device, which bounds both what a reset must drain and the host time one poll spends
  // launching; an RT task gets all of its kernels at once.
  void top_up(Lane& l) {
    Task& t = *l.task;
    if (t.error || l.cut_at != kNoCut) return;
    const Client& c = clients[static_cast<size_t>(t.client)];
    const uint64_t cap =
        c.task_class == TaskClass::kBestEffort ? static_cast<uint64_t>(options.inflight_cap) : UINT64_MAX;
    while (t.next_launch < c.kernels && l.launched - l.completed < cap) {
      if (yield_to_rt(c)) return;
      const bool first = t.next_launch == 0 && t.first_seq == 0;
      LaunchOptions lo;
      lo.preemptible = c.task_class == TaskClass::kBestEffort;
      lo.timed = first || t.next_launch == c.kernels - 1;
      // An RT task is never rolled back: only its last kernel's end matters.
      lo.report = lo.preemptible || t.next_launch == c.kernels - 1;
      uint64_t seq;
      try {
        seq = launch(l, c.instance, t.next_launch, lo);
      } catch (...) {
        t.error = std::current_exception();
        return;
      }
      if (first) t.first_seq = seq;
      ++t.next_launch;
    }
  }

  // Hands the device one kernel on the lane's stream and counts it.
  uint64_t launch(Lane& l, InstanceId instance, int kernel, const LaunchOptions& lo) {
    const uint64_t seq = device.launch(l.stream, instance, kernel, lo);
    ATOLL_CHECK(seq == l.launched + 1, kInternal, "stream {} returned launch {} after {}: another user shares it",
                l.stream, seq, l.launched);
    l.launched = seq;
    ++stats.kernel_launches;
    return seq;
  }

  // In the preemptive modes a BE launch loop stops as soon as an RT request has arrived.
  bool yield_to_rt(const Client& c) {
    if (!preemptive() || c.task_class != TaskClass::kBestEffort) return false;
    admit();
    return rt_queued();
  }

  // Keeps a lane busy: binds the next task, or hands the bound one more kernels.
  void feed(Lane& l) {
    if (!l.task) {
      start_next(l);
      return;
    }
    top_up(l);
    settle(l);
  }

  // Reads the lane's completion counter and moves the cursor.
  void observe(Lane& l) {
    if (!l.task) return;
    const uint64_t c = device.completed(l.stream);
    if (c == l.completed) return;
    ATOLL_CHECK(c > l.completed && c <= l.launched, kInternal,
                "stream {} reports {} launches ended; {} were seen ended and {} issued", l.stream, c, l.completed,
                l.launched);
    l.completed = c;
    Task& t = *l.task;
    if (std::exception_ptr e = device.take_error(l.stream); e && !t.error) t.error = e;
    if (t.start < 0 && t.first_seq != 0 && c >= t.first_seq) {
      const auto span = device.launch_span(l.stream, t.first_seq);
      t.start = span ? span->start : device.now();
    }
    const uint64_t known = std::min(c, l.cut_at);
    t.cursor = std::max(t.cursor, l.base_kernel + static_cast<int>(known - (l.base_seq - 1)));
  }

  // A drained lane rolls a reset task back to its first unfinished kernel, or finishes the task.
  void settle(Lane& l) {
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

  void finish(Lane& l) {
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

  void deliver(TaskPtr t, std::vector<Tensor> outputs, DeviceTime end) {
    TaskResult r;
    r.id = t->id;
    r.client = t->client;
    r.task_class = clients[static_cast<size_t>(t->client)].task_class;
    r.outputs = std::move(outputs);
    r.arrival = t->request.arrival;
    r.finish = end;
    r.start = t->start >= 0 ? t->start : end;
    r.dispatch = t->dispatch >= 0 ? t->dispatch : r.start;
    r.preemptions = t->preemptions;
    r.preempted_tasks = t->preempted_tasks;
    if (t->error) {
      ++stats.failed;
    } else if (r.task_class == TaskClass::kRealTime) {
      ++stats.rt_completed;
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

  // ---- RT mode (wait, reset) ----

  void enter_rt_mode() {
    const DeviceTime at = device.now();
    rt_mode = true;
    int preempted = 0;
    for (Lane& l : lanes) {
      if (l.source != Lane::Source::kClient) continue;
      observe(l);
      settle(l);
      if (!l.task || l.launched == l.completed) continue;
      ++preempted;
      ++l.task->preemptions;
      if (options.mode == Mode::kReset) l.cut_at = l.completed;
    }
    // Armed: the RT task's own lane raises the flag when its first hold is released.
    if (preempted > 0 && options.mode == Mode::kReset && !armed) {
      device.raise_flag(lanes[static_cast<size_t>(rt_lanes.front())].stream);
      flag_raised = true;
    }
    stats.preemptions += preempted;
    pending_preempted = preempted;
    if (options.record_events) events.push_back({SchedulerEvent::Kind::kRtModeEnter, at, preempted});
  }

  void leave_rt_mode() {
    for (const Lane& l : lanes) {
      if (l.cut_at != kNoCut) return;  // still draining: the flag must stay up
    }
    const DeviceTime at = device.now();
    if (flag_raised) {
      device.lower_flag();
      flag_raised = false;
    }
    rt_mode = false;
    if (options.record_events) events.push_back({SchedulerEvent::Kind::kRtModeLeave, at, 0});
  }

  bool rt_running() const {
    return std::any_of(rt_lanes.begin(), rt_lanes.end(),
                       [&](int i) { return lanes[static_cast<size_t>(i)].task != nullptr; });
  }

  void schedule_preemptive() {
    for (;;) {
      if (!rt_running() && rt_queued()) {
        if (!rt_mode) enter_rt_mode();
        if (armed) {
          start_armed_rt();
        } else {
          start_next(lanes[static_cast<size_t>(rt_lanes.front())]);
        }
      }
      if (rt_mode && !rt_running() && !rt_queued()) leave_rt_mode();
      if (rt_mode) return;
      for (Lane& l : lanes) {
        if (l.source == Lane::Source::kClient && !rt_queued()) feed(l);
      }
      // An RT client's first task is enqueued once BE work is on the device; later ones right
      // behind the task before them (start_armed_rt).
      if (armed && !rt_queued()) arm_idle_rt_lanes();
      // Launching BE kernels takes host time; an RT request that arrived meanwhile starts now
      // rather than after the next completion.
      if (!rt_queued()) return;
    }
  }

  // ---- armed RT lanes (reset mode on devices that hold) ----

  // Enqueues the client's next task behind two holds: the flag write, then the input upload and
  // every kernel. The launches are parked: not in flight until released.
  void arm(Lane& l) {
    const Client& c = clients[static_cast<size_t>(l.client)];
    device.hold(l.stream);
    ++l.holds;
    device.raise_flag(l.stream);
    device.hold(l.stream);
    ++l.holds;
    device.enqueue_inputs(c.instance, l.stream);
    for (int k = 0; k < c.kernels; ++k) {
      LaunchOptions lo;
      lo.timed = k == 0 || k == c.kernels - 1;
      lo.report = k == c.kernels - 1;
      const uint64_t seq = launch(l, c.instance, k, lo);
      if (k == 0) l.armed_seq = seq;
      ++l.parked;
    }
  }

  void arm_idle_rt_lanes() {
    for (int i : rt_lanes) {
      Lane& l = lanes[static_cast<size_t>(i)];
      if (!l.task && l.holds == 0) arm(l);
    }
  }

  void release(Lane& l) {
    device.release(l.stream);
    --l.holds;
  }

  // Starts the first RT task from its client's armed lane: the flag goes up at once, the inputs
  // are staged while BE work drains, then the task runs. The device sees two host stores.
  void start_armed_rt() {
    TaskPtr t = pop_rt();
    Lane& l = lanes[static_cast<size_t>(rt_lane_of[static_cast<size_t>(t->client)])];
    if (l.holds == 0) arm(l);  // the first request, or one right behind its predecessor
    release(l);
    flag_raised = true;
    const Client& c = clients[static_cast<size_t>(t->client)];
    try {
      device.stage_inputs(c.instance, t->request.inputs);
    } catch (...) {
      // The held task still runs (on the previous inputs) so the lane stays in step; its
      // result is dropped and the request fails.
      t->error = std::current_exception();
    }
    release(l);
    t->dispatch = device.now();
    t->preempted_tasks = pending_preempted;
    pending_preempted = 0;
    t->first_seq = l.armed_seq;
    t->next_launch = c.kernels;
    l.base_seq = l.armed_seq;
    l.base_kernel = 0;
    l.parked = 0;
    l.task = std::move(t);
    ++stats.armed_rt_tasks;
    // The client's next task goes in behind this one now, while BE work is stopped anyway and
    // the host would only wait for the RT kernels: arming later would take host time from BE.
    arm(l);
    settle(l);
  }

  // Releases every armed lane's held work (it runs on stale inputs; nobody reads its outputs)
  // and waits for it, so no held work outlives the scheduler: it would block the device.
  void disarm() {
    bool released = false;
    for (int i : rt_lanes) {
      Lane& l = lanes[static_cast<size_t>(i)];
      if (l.holds == 0) continue;
      while (l.holds > 0) release(l);
      device.synchronize(l.stream);
      l.completed = l.launched;
      l.parked = 0;
      released = true;
    }
    if (released || flag_raised) {
      device.lower_flag();
      flag_raised = false;
    }
  }

  // ---- the step ----

  void poll() {
    in_poll = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{in_poll};
    admit();
    for (Lane& l : lanes) {
      observe(l);
      settle(l);
    }
    admit();  // completion callbacks may have submitted
    if (preemptive()) {
      schedule_preemptive();
      return;
    }
    for (Lane& l : lanes) feed(l);
  }

  bool in_flight() const {
    return std::any_of(lanes.begin(), lanes.end(), [](const Lane& l) { return l.launched - l.parked != l.completed; });
  }

  bool has_work() {
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
  void fail_all(const std::exception_ptr& error) {
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

  ExecDevice& device;
  SchedulerOptions options;
  const bool armed;            // SchedulerOptions::armed_rt in effect
  std::deque<Client> clients;  // a deque: Client holds a deque, which vectors would copy on growth
  std::vector<Lane> lanes;
  std::vector<int> rt_lanes;    // one shared lane, or one armed lane per RT client
  std::vector<int> rt_lane_of;  // armed: the lane of each client (-1 for BE clients)
  bool rt_mode = false;
  bool flag_raised = false;
  bool in_poll = false;
  int pending_preempted = 0;  // BE tasks preempted for the RT task about to start
  size_t next_be_client = 0;  // seq mode's round-robin position
  SchedulerStats stats;
  std::vector<SchedulerEvent> events;
  std::vector<TaskPtr> pending;     // heap by (arrival, id): submitted, not arrived yet
  std::exception_ptr thread_error;  // what ended the scheduler thread, for stop() to rethrow

  std::mutex inbox_mutex;
  std::vector<TaskPtr> inbox;  // submitted since the last poll
  uint64_t next_id = 1;        // guarded by inbox_mutex
};

Scheduler::Scheduler(ExecDevice& device, SchedulerOptions options)
    : impl_(std::make_unique<Impl>(device, options)), device_(device), options_(options) {}

Scheduler::~Scheduler() {
  stop_requested_ = true;
  if (worker_.joinable()) worker_.join();
  impl_->fail_all(make_error(ErrorCode::kInternal, "the scheduler was destroyed before the request finished"));
  try {
    impl_->disarm();
  } catch (const std::exception& e) {
    spdlog::error("scheduler: releasing held RT work failed: {}", e.what());
  }
}

ClientId Scheduler::add_client(TaskClass task_class, std::string name, InstanceId instance) {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "clients must be added before the scheduler thread starts");
  return impl_->add_client(task_class, std::move(name), instance);
}

std::future<TaskResult> Scheduler::submit(ClientId client, Request request) {
  std::future<TaskResult> future;
  impl_->enqueue(client, std::move(request), nullptr, &future);
  return future;
}

uint64_t Scheduler::submit(ClientId client, Request request, Completion done) {
  ATOLL_CHECK(done != nullptr, kInvalidArgument, "submit needs a completion callback");
  return impl_->enqueue(client, std::move(request), std::move(done), nullptr);
}

void Scheduler::poll() {
  impl_->poll();
}

void Scheduler::run_until(DeviceTime time) {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "run_until while the scheduler runs on its own thread");
  for (;;) {
    impl_->poll();
    if (device_.now() >= time) return;
    device_.wait_until(std::min(time, impl_->next_arrival()));
  }
}

void Scheduler::run_until_idle() {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "run_until_idle while the scheduler runs on its own thread");
  for (;;) {
    impl_->poll();
    if (!impl_->has_work()) return;
    const DeviceTime next = impl_->next_arrival();
    ATOLL_CHECK(impl_->in_flight() || next != kNever, kInternal,
                "scheduler stalled in mode {}: requests wait but nothing runs or arrives", mode_name(options_.mode));
    device_.wait_until(next);
  }
}

void Scheduler::start() {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "the scheduler thread is already running");
  stop_requested_ = false;
  worker_ = std::thread([this] {
    try {
      while (!stop_requested_) {
        impl_->poll();
        device_.wait_until(std::min(impl_->next_arrival(), device_.now() + options_.idle_poll_ns));
      }
    } catch (...) {
      impl_->thread_error = std::current_exception();
      impl_->fail_all(impl_->thread_error);
    }
  });
}

void Scheduler::stop() {
  stop_requested_ = true;
  if (worker_.joinable()) worker_.join();
  if (std::exception_ptr e = std::exchange(impl_->thread_error, nullptr)) std::rethrow_exception(e);
}

SchedulerStats Scheduler::stats() const {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "scheduler statistics are read after stop()");
  return impl_->stats;
}

const std::vector<SchedulerEvent>& Scheduler::events() const {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "scheduler events are read after stop()");
  return impl_->events;
}

}  // namespace atl::sched
