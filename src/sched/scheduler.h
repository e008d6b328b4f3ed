#pragma once
// REEF's scheduler. Real-time (RT) and best-effort (BE) clients share one device. Tasks are
// requests with a kernel cursor; each client's requests run in arrival order on the client's
// own stream (seq: one stream for all). What a mode does is in its ModeTraits (modes.h). In
// the preemptive modes BE tasks run through virtual host queues that hand the device at most
// `inflight_cap` kernels; an RT arrival switches to RT mode: BE launches stop, BE work on the
// device is preempted (reset: the flag makes it exit), RT tasks run one at a time in FIFO or
// deadline order across RT clients, and BE tasks resume from their first unfinished kernel
// once the RT queue is empty. On a device that can hold work each RT client's next task
// already waits on the device (SchedulerOptions::armed_rt), so an arrival costs host stores,
// not API calls, in every mode but seq.
//
// The same logic drives every device. poll() never blocks; on a real device a thread loops
// poll + ExecDevice::wait_until (start/stop); on the simulated device run_until() loops in the
// caller's thread, which keeps the timeline deterministic.
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sched/exec_device.h"
#include "sched/modes.h"
#include "sched/task.h"

namespace atl::sched {

// Which RT task runs next when several wait: first arrived, or earliest deadline.
enum class RtOrder : uint8_t { kArrival, kDeadline };

// How the arrival sentinel (SchedulerOptions::arrival_sentinel) runs. Both off until a GPU run
// has measured them (session 19 wrote them; ArrivalSentinel says why each could help).
struct SentinelOptions {
  // The thread's SCHED_FIFO priority (0: normal priority), on devices with a real clock. Refused
  // (no CAP_SYS_NICE, as in the H200's container), it warns once and runs at normal priority.
  int fifo_priority = 0;
  // Read the completion words while spinning towards the arrival, not after the claim.
  bool spin_words = false;
};

struct SchedulerOptions {
  Mode mode = Mode::kReset;
  int inflight_cap = 4;  // kernels a BE task may have on the device at once (every mode)
  // Above 0: a BE lane keeps fewer kernels queued behind its running one where they are long,
  // only as many as cover this much time by the lane's measured kernel time (at least one, at
  // most inflight_cap - 1). A preemption drains every queued kernel (its blocks exit at entry),
  // and a batch-32 kernel's grid is thousands of blocks; short kernels still queue enough to
  // hide the launch gaps.
  DeviceTime be_queue_ns = 0;
  RtOrder rt_order = RtOrder::kArrival;
  // On its own thread, how long one device wait may last before new submissions are looked at.
  DeviceTime idle_poll_ns = 2000;
  bool record_events = false;  // keep SchedulerEvents for events()
  // With record_events: only events before `events_until`, and of those before `events_from`
  // only the last (the state the window opens in), so a trace window of a long run does not
  // cost memory for the rest of it.
  DeviceTime events_from = 0, events_until = kNever;
  // Every mode but seq, on a device that can hold work (ExecDevice::can_hold): each RT client's
  // next task waits on the device, enqueued behind holds on its own stream, and an arrival makes
  // no API call: in reset mode releasing the first hold raises the flag and the inputs are staged
  // while BE work drains; releasing the last starts the task. false: the flag write and the RT
  // kernels are enqueued when the request arrives.
  bool armed_rt = true;
  // Kernels of an armed task enqueued behind its holds; the rest are launched when it starts,
  // while the first ones run. Held launches fill the GPU's launch queue, and a launch into a
  // full queue blocks the host until held work moves: with several RT clients of hundreds of
  // kernels each (DISB D: DenseNet-201, ResNet-152) whole armed tasks stalled the scheduler.
  int armed_kernels = 16;
  // When a client's next task is armed: right behind its running one (true: the host is done with
  // it before the running task ends) or once the running one has ended (false, also in RT mode).
  // DISB E on the H200 had graph launches of up to 6.4 ms (session 21), but atoll_bench_launch saw
  // none block behind a running graph, and E was no better with false (session 22).
  bool arm_behind_running = true;
  // Armed RT lanes on a scheduler running on its own thread (start): a second thread opens an
  // idle lane at its request's arrival (ArrivalSentinel), instead of the scheduler's thread
  // between two BE launches. For requests submitted ahead of their arrival whose inputs lie in
  // staging memory (ExecDevice::request_buffers); others arrive the usual way. Not in the
  // padding modes, whose RT start also plans BE padding.
  bool arrival_sentinel = true;
  SentinelOptions sentinel;
  // An RT task goes to the device in one ExecDevice::launch_range call (CUDA: one graph launch)
  // instead of one launch per kernel, armed or not; armed, the whole task waits behind its
  // holds. In the padding modes only its last kernel then reports, and padding follows the task
  // by its profile from its start (padding_drift); per kernel, at least every padding_resync_ns.
  bool rt_single_launch = true;
  // Work waiting on the device with no launch ending and no task finishing for this long fails
  // every request with an error naming what the scheduler waits on, instead of hanging.
  DeviceTime stall_timeout_ns = 10'000'000'000;
  // Padding modes: how long after its launch call a padded BE kernel can start. It must end,
  // this much plus its profiled time from now, before the RT kernel beside it does.
  DeviceTime padding_launch_ns = 6'000;
  // Padding modes with per-kernel RT launches: an RT kernel reports its end at least this often
  // by its profiled time (and the last one always); 0 reports every kernel (padding_reports).
  DeviceTime padding_resync_ns = 200'000;
  // Padding modes: how far an RT task may run off its profile, as a share of the time since its
  // last reported kernel; padded BE kernels keep that much time to spare.
  double padding_drift = 0.05;
  // Padding modes: the RT slowdown padding may cost, as a fraction of an RT task's device time
  // (0.01: 1%). The guard (padding_guard.h) measures the slowdown per RT client and pads beside
  // only the share of its tasks that keeps it within this; 0: every task pads.
  double padding_rt_budget = 0;
};

// RT mode transitions (wait and reset modes), for timelines.
struct SchedulerEvent {
  enum class Kind : uint8_t { kRtModeEnter, kRtModeLeave };
  Kind kind = Kind::kRtModeEnter;
  DeviceTime at = 0;  // device clock when the scheduler acted
  int preempted = 0;  // enter: BE tasks preempted with kernels in flight
};

// Where one scheduler step (poll) spends host time. A long step delays every RT arrival behind
// it, so the slowest steps and their phase explain late reactions.
enum class PollPhase : uint8_t {
  kAdmit,     // taking submissions and arrivals
  kComplete,  // reading completions, finishing tasks, completion callbacks
  kLaunch,    // starting tasks (input staging), launches, the RT queue
  kArm,       // enqueuing RT clients' next tasks behind their holds
};
const char* poll_phase_name(PollPhase phase);

struct PollStats {
  int64_t count = 0;
  int64_t over_50us = 0;  // steps of more than 50 us
  DeviceTime longest_ns = 0;
  PollPhase longest_phase = PollPhase::kAdmit;  // the longest phase of the longest step
  void add(const DeviceTime (&phase_ns)[4]);
};

struct SchedulerStats {
  int64_t rt_completed = 0;
  int64_t be_completed = 0;
  int64_t failed = 0;
  int64_t preemptions = 0;         // BE tasks preempted with kernels in flight
  int64_t relaunched_kernels = 0;  // launches not known complete at a reset, launched again
  int64_t kernel_launches = 0;
  int64_t interrupted_stagings = 0;  // BE input copies abandoned for an RT arrival
  int64_t armed_rt_tasks = 0;        // RT tasks started from work enqueued before they arrived
  int64_t sentinel_rt_tasks = 0;     // of those, started by the arrival sentinel
  int64_t padded_kernels = 0;        // BE kernels launched beside a running RT task (padding modes)
  int64_t padded_slices = 0;         // slices of BE kernels launched so (padding-slices)
  int64_t padded_capped = 0;         // grid-stride BE kernels launched so whole on capped grids (padding-slices)
  int64_t padding_guarded = 0;       // RT tasks the padding guard ran with nothing padded beside them
  PollStats polls;
};

class Scheduler {
 public:
  Scheduler(ExecDevice& device, SchedulerOptions options = {});
  ~Scheduler();  // stops the thread; requests still pending fail
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Registers a client on a loaded instance it then owns exclusively. Not while running on a thread.
  ClientId add_client(TaskClass task_class, std::string name, InstanceId instance);

  // Thread-safe. Errors (bad inputs, device failures, BE requests in rt-only) fail the request.
  std::future<TaskResult> submit(ClientId client, Request request);
  uint64_t submit(ClientId client, Request request, Completion done);

  // Drives the scheduler in the calling thread until the device clock reaches `time`.
  void run_until(DeviceTime time);
  // ... until every submitted request has been answered.
  void run_until_idle();
  // Drives the scheduler on its own thread until stop().
  void start();
  // Stops the thread; rethrows the error that ended it early, if one did.
  void stop();

  // One non-blocking step: admit arrivals, observe completions, launch.
  void poll();

  const SchedulerOptions& options() const { return options_; }
  // Whether RT tasks were enqueued before they arrived (decided at the first poll); after stop().
  bool arms_rt() const;
  SchedulerStats stats() const;                       // not while running on a thread
  const std::vector<SchedulerEvent>& events() const;  // with record_events; not while running

 private:
  struct Impl;
  template <typename Step>
  void drive(Step step);

  std::unique_ptr<Impl> impl_;
  ExecDevice& device_;
  SchedulerOptions options_;
  std::thread worker_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace atl::sched
