#pragma once
// The scheduler's state and steps, shared by scheduler.cpp (admission, lanes, RT mode, the step),
// armed_lanes.cpp (RT tasks enqueued on the device before they arrive) and progress_watch.cpp
// (failing a run that makes no progress instead of hanging). Internal to src/sched.
#include <cstdint>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "sched/arrival_sentinel.h"
#include "sched/padding.h"
#include "sched/padding_guard.h"
#include "sched/scheduler.h"

namespace atl::sched {

inline constexpr uint64_t kNoCut = UINT64_MAX;

struct Scheduler::Impl {
  struct Task {
    uint64_t id = 0;
    ClientId client = -1;
    Request request;
    int cursor = 0;          // first kernel not known to have completed
    int next_launch = 0;     // next kernel to hand to the device
    uint64_t first_seq = 0;  // launch of kernel 0 on the first attempt; 0 before it
    DeviceTime admitted = -1;
    bool by_sentinel = false;  // the arrival sentinel admitted it (opened its lane)
    DeviceTime sentinel_reached = 0, sentinel_claimed = 0;  // TaskResult's
    DeviceTime started = -1;  // RT: start_rt began (TaskResult::started)
    DeviceTime dispatch = -1;
    DeviceTime start = -1;
    // Padding slices: units [0, sliced_units) of kernel sliced_kernel ran in padded slices,
    // which are never cut, so they are done once anything launched after them runs.
    int sliced_kernel = -1;
    int64_t sliced_units = 0;
    int64_t units_done(int kernel) const { return kernel == sliced_kernel ? sliced_units : 0; }
    // Padding (RT tasks): whether the guard lets BE work pad beside it, and whether any did.
    bool padding_allowed = true;
    bool padded_beside = false;
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
    int lane = -1;              // its own lane; -1 where every client shares one (seq)
    KernelCosts costs;          // from the instance's profile, in the padding modes
  };

  // A device stream and its virtual host queue: the unlaunched kernels of the bound task.
  struct Lane {
    StreamId stream = -1;
    ClientId client = -1;  // -1: the lane serves every client (seq)
    TaskPtr task;
    uint64_t launched = 0;   // launches issued on the stream
    uint64_t completed = 0;  // launches seen to have ended
    // Launch base_seq ran kernel base_kernel; the launches after it ran the kernels after it.
    uint64_t base_seq = 1;
    int base_kernel = 0;
    // The completed count read just before the flag went up. Launches after it may have exited
    // early, so they count as unfinished until the lane drains and rolls back. kNoCut otherwise.
    uint64_t cut_at = kNoCut;
    // Armed lanes (RT clients' lanes while armed): launches enqueued for the next task behind
    // `holds` pending holds; `parked` of them are not in flight until released, the first
    // being launch `armed_seq`.
    int holds = 0;
    uint64_t parked = 0;
    uint64_t armed_seq = 0;
    // Padding (BE lanes): the last launch made beside an RT task (not preemptible, so never
    // cut) and the slot share and SM spread it takes while in flight.
    uint64_t padded_through = 0;
    double padded_share = 0;
    double padded_spread = 0;
    // BE lanes (SchedulerOptions::be_queue_ns): the kernel time measured from the spacing of
    // completions while work was queued, when the last completion was seen, and the launches
    // then still in flight.
    DeviceTime kernel_ns = 0;
    DeviceTime ended_at = -1;
    uint64_t backlog = 0;
    // Padding (RT lanes): the running task's kernel as last seen, and since when.
    uint64_t seen_task = 0;
    int seen_kernel = -1;
    DeviceTime seen_since = 0;
  };

  Impl(ExecDevice& d, const SchedulerOptions& o);

  // ---- clients and admission (scheduler.cpp) ----
  ClientId add_client(TaskClass task_class, std::string name, InstanceId instance);
  uint64_t enqueue(ClientId client, Request request, Completion done, std::future<TaskResult>* future);
  static bool arrives_later(const TaskPtr& a, const TaskPtr& b) {
    return std::tie(a->request.arrival, a->id) > std::tie(b->request.arrival, b->id);
  }
  void take_inbox();
  void admit();
  DeviceTime next_arrival();
  bool rt_queued() const;
  TaskPtr pop_front(Client& c);
  TaskPtr pop_rt();
  TaskPtr pop_be_round_robin();
  TaskPtr next_task_for(const Lane& l);
  Client& client_of(const Lane& l) { return clients[static_cast<size_t>(l.client)]; }
  // The client of the lane's bound task: also right for the lane every client shares (seq).
  Client& task_client(const Lane& l) { return clients[static_cast<size_t>(l.task->client)]; }
  Lane& lane_of(ClientId c) { return lanes[static_cast<size_t>(clients[static_cast<size_t>(c)].lane)]; }
  bool is_rt(const Client& c) const { return c.task_class == TaskClass::kRealTime; }

  // ---- running tasks (scheduler.cpp) ----
  int add_lane(ClientId client, StreamPriority priority);
  bool bind(Lane& l, TaskPtr t);
  void start_next(Lane& l);
  void top_up(Lane& l);
  uint64_t launch(Lane& l, InstanceId instance, int kernel, const LaunchOptions& lo);
  uint64_t launch_slice(Lane& l, InstanceId instance, int kernel, const KernelSlice& slice, const LaunchOptions& lo);
  // The task's next kernel: whole, or the units padded slices left of it.
  uint64_t launch_next(Lane& l, const Task& t, const Client& c, const LaunchOptions& lo);
  // Kernels [first, end) of an RT task in one device call (SchedulerOptions::rt_single_launch);
  // returns the sequence number of kernel `first`.
  uint64_t launch_rest(Lane& l, const Client& c, int first);
  bool single_launch(const Client& c) const;
  bool yield_to_rt(const Client& c);
  void feed(Lane& l);
  void observe(Lane& l);
  void time_be_kernels(Lane& l, uint64_t completed);
  uint64_t be_cap(const Lane& l) const;
  void settle(Lane& l);
  void finish(Lane& l);
  void deliver(TaskPtr t, std::vector<Tensor> outputs, DeviceTime end);

  // ---- the RT queue (layout kRtQueue; rt_queue.cpp) ----
  // `words`: the BE streams' completion words as the arrival sentinel read them before it
  // raised the flag (by lane); null: read now, before the flag goes up.
  void enter_rt_mode(const std::vector<uint32_t>* words = nullptr);
  void leave_rt_mode();
  void record_event(const SchedulerEvent& e);  // with options.record_events, in its window
  bool rt_running() const;
  // `opened_at`: when the arrival sentinel opened the task's lane; -1 where the scheduler starts it.
  void start_rt(TaskPtr t, DeviceTime opened_at = -1);
  void start_next_rt();   // the RT queue's head, when no RT task runs
  void start_rt_first();  // the same, having read only the RT lanes' completions
  void schedule_rt_queue();

  // ---- padding (padding.cpp) ----
  KernelCosts profiled_costs(const std::string& client, InstanceId instance) const;
  void pad_be_lanes();
  // The running RT task's window, and the task (null where nothing may pad beside it).
  RtWindow running_rt_window(Task** rt_task);
  bool pad(Lane& l, RtWindow& window);

  // ---- armed lanes (armed_lanes.cpp) ----
  void decide_arming();
  bool armable(const Lane& l) const;
  void arm(Lane& l);
  void arm_idle_lanes();
  bool rt_lanes_armed() const;
  void release_hold(Lane& l);
  void start_armed(Lane& l, TaskPtr t, DeviceTime opened_at);
  void disarm();

  // ---- the arrival sentinel (armed_lanes.cpp) ----
  void start_sentinel();
  void stop_sentinel();
  void expect_arrival(const Task& t);
  void publish_openers();
  // Takes over an opening the sentinel made: enters RT mode as of its flag. After a read of BE
  // completions, so a launch that exited on the sentinel's flag is never taken for finished.
  void take_opening();
  void start_opened();

  // ---- progress (progress_watch.cpp) ----
  void note_progress() { last_progress = device.now(); }
  void check_progress();
  std::string describe_wait() const;

  // ---- the step (scheduler.cpp) ----
  void poll();
  bool in_flight() const;
  bool has_work();
  void fail_all(const std::exception_ptr& error);

  ExecDevice& device;
  SchedulerOptions options;
  const ModeTraits& traits;
  bool arming_decided = false;
  bool armed = false;          // RT tasks are enqueued before they arrive (decided at the first poll)
  std::deque<Client> clients;  // a deque: Client holds a deque, which vectors would copy on growth
  std::vector<Lane> lanes;
  std::vector<int> rt_lanes;  // the lanes of RT clients (kRtQueue and kLanePerClient layouts)
  bool rt_mode = false;
  bool flag_raised = false;
  bool in_poll = false;
  int pending_preempted = 0;  // BE tasks preempted for the RT task about to start
  size_t next_be_client = 0;  // seq mode's round-robin position
  DeviceTime last_progress = 0;
  SchedulerStats stats;
  PaddingGuard padding_guard;
  std::vector<SchedulerEvent> events;
  std::vector<TaskPtr> pending;                    // heap by (arrival, id): submitted, not arrived yet
  DeviceTime admitted_through = -1;                // the clock of the last look at arrivals
  std::unique_ptr<ArrivalSentinel> sentinel;       // SchedulerOptions::arrival_sentinel, while started
  std::optional<ArrivalSentinel::Opening> opened;  // taken over, its task not started yet
  std::exception_ptr thread_error;                 // what ended the scheduler thread, for stop() to rethrow

  std::mutex inbox_mutex;
  std::vector<TaskPtr> inbox;  // submitted since the last poll
  uint64_t next_id = 1;        // guarded by inbox_mutex
};

std::exception_ptr make_scheduler_error(ErrorCode code, std::string message);

}  // namespace atl::sched
