#pragma once
// Co-location runs: clients share one device under one scheduling mode. run_workload drives any
// mix of open-loop clients (requests arrive at scheduled times, answered or not) and closed-loop
// clients (each answer sends the next request) and returns every request's fate; `atoll
// colocate` (periodic RT, closed-loop BE, REEF's report) and the DISB runner (src/bench) build on it.
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/session.h"
#include "sched/exec_device.h"
#include "sched/scheduler.h"
#include "sched/sim_exec_device.h"

namespace atl::sched {

// Open-loop requests one client may schedule in one run: a longer schedule is refused up front
// rather than grown until memory runs out.
inline constexpr int64_t kMaxArrivalsPerClient = 10'000'000;
// The longest run `atoll colocate` and `atoll bench disb` take (--duration), in seconds: what
// their up-front memory limits are sized for.
inline constexpr double kMaxRunSeconds = 3600;

// A BE client's upload: a copy-engine copy when its task is staged, or a preemptible SM copy
// launched with each launch of its kernel 0 (ExecDevice::set_uploads_with_first_kernel), which
// never holds the copy engine an RT upload needs. kAuto: the SM copy for uploads of at least
// kBeSmUploadBytes, where waiting behind one on the copy engine costs an RT request more than
// its preemption target (a 19 MB batch-32 upload: F's preemption p99 308-387 us with the copy
// engine, 97 us with SM copies on the H200); smaller ones stay on the copy engine, where they
// cost less than the SM copy's bytes in flight (C's 602 KB: +6.1% RT p99 with SM copies, +3.7%
// without).
enum class BeUploads : uint8_t { kCopyEngine, kSms, kAuto };
inline constexpr int64_t kBeSmUploadBytes = int64_t{4} << 20;
const char* be_uploads_name(BeUploads u);  // "copy-engine" / "sms" / "auto"
BeUploads be_uploads_from_name(const std::string& name);  // kInvalidArgument for others
// Whether a BE client whose requests upload `bytes` gets the SM copy, on a device that can make
// one or not (kSms where it cannot is the device's kUnsupported error, raised when applied).
bool be_upload_on_sms(BeUploads how, int64_t bytes, bool device_can);

// An open-loop client's schedule, drawn one arrival at a time (ns from the start of the run,
// ascending; nullopt after the last), so a long run never holds a whole schedule.
using ArrivalStream = std::function<std::optional<DeviceTime>()>;
// `times` in turn (a schedule already at hand: tests, short runs).
ArrivalStream arrivals_from(std::vector<DeviceTime> times);

struct WorkloadClient {
  std::string name;
  TaskClass task_class = TaskClass::kBestEffort;
  InstanceId instance = -1;
  // Open loop: requests arrive at the times `arrivals` gives whether or not earlier ones were
  // answered (none without it). Closed loop: `concurrency` requests stay outstanding; each
  // answer that comes before the end sends the next, arriving when the answer came.
  bool closed_loop = false;
  ArrivalStream arrivals;
  int concurrency = 1;
  DeviceTime relative_deadline = kNever;  // request deadline = arrival + this (RtOrder::kDeadline)
  std::vector<Tensor> inputs;             // every request's inputs
};

struct RequestOutcome;

struct Workload {
  std::vector<WorkloadClient> clients;
  DeviceTime duration = 0;  // closed-loop clients stop re-submitting here
  // How long after `duration` answers are awaited; requests unanswered then count as dropped.
  // kNever waits for every answer.
  DeviceTime grace = kNever;
  SchedulerOptions scheduler;
  // A simulated device's clock moves only when driven, so it runs in this thread in simulated
  // time (deterministic). A real device runs the scheduler on its own thread while this thread
  // sleeps until each arrival; the device clock is taken to advance at the host's rate.
  bool real_time = false;
  // Every client's inputs live in its instance's staging memory for the run
  // (ExecDevice::request_buffers), as a camera driver's frames live in a DMA buffer, so a request
  // needs no host copy before its upload. Off, or where the device has no such buffers: the
  // scheduler thread copies each request into staging on its way to the device.
  bool staged_inputs = true;
  // RT clients' uploads and downloads run on the SMs (ExecDevice::set_sm_copies), not on a copy
  // engine where they queue behind BE clients' copies.
  bool rt_sm_copies = false;
  // How BE clients' inputs reach the device (BeUploads).
  BeUploads be_uploads = BeUploads::kAuto;
  // Called every few tens of milliseconds (device time) with the time left until `duration`.
  std::function<void(DeviceTime remaining)> on_progress;
  // When set, each request's outcome goes here (with the run's start) once it is answered, or
  // at the end for requests never answered, and WorkloadRun::requests stays empty: the run holds
  // only its outstanding requests, so a long run's memory is what the caller keeps. Called with
  // the driver's lock held, from one thread at a time (the scheduler's, or the caller's at the end).
  std::function<void(const RequestOutcome& outcome, DeviceTime run_start)> on_outcome;
};

// How RT requests reach the device and BE inputs theirs: the settings colocate, DISB and their
// command-line flags share (--rt-arrival, --inputs, --rt-copies, --be-uploads, --rt-launch,
// --rt-arm-next, --sentinel-priority, --sentinel-words).
struct RtPath {
  bool armed_rt = true;                     // SchedulerOptions::armed_rt
  bool arrival_sentinel = true;             // SchedulerOptions::arrival_sentinel
  SentinelOptions sentinel;                 // SchedulerOptions::sentinel
  bool rt_single_launch = true;             // SchedulerOptions::rt_single_launch
  bool arm_behind_running = true;           // SchedulerOptions::arm_behind_running
  bool staged_inputs = true;                // Workload::staged_inputs
  bool rt_sm_copies = false;                // Workload::rt_sm_copies
  BeUploads be_uploads = BeUploads::kAuto;  // Workload::be_uploads
  // Sets those fields of `w` and of its scheduler options.
  void apply(Workload& w) const;
};

enum class RequestStatus : uint8_t {
  kServed,
  kFailed,   // answered with an error
  kDropped,  // not answered by the end of the grace period
};

struct RequestOutcome {
  RequestStatus status = RequestStatus::kDropped;
  TaskResult result;  // client and scheduled arrival always, the rest once served; no outputs
  std::exception_ptr error;
};

struct WorkloadRun {
  DeviceTime start = 0;                  // device clock when the run began; arrivals count from here
  DeviceTime end = 0;                    // start + duration
  std::vector<RequestOutcome> requests;  // every request submitted, in submission order (none with on_outcome)
  SchedulerStats stats;
  bool armed_rt = false;               // RT tasks were enqueued before arriving (Scheduler::arms_rt)
  int staged_clients = 0;  // clients whose requests carried their instance's staging memory (Workload::staged_inputs)
  std::vector<SchedulerEvent> events;  // with scheduler.record_events
};

// Runs the workload from the device's current time. Scheduler clients are the workload's
// clients in order, so TaskResult::client indexes `workload.clients`.
WorkloadRun run_workload(ExecDevice& device, const Workload& workload);

// The RT clients' `buffer` persisting in L2 (ExecDevice::set_l2_persistence) with a set-aside of
// `budget_bytes` (0: the device's largest), before the workload runs; the set-aside granted, 0
// for L2Persist::kOff (nothing is asked of the device then).
int64_t persist_rt_clients(ExecDevice& device, const Workload& workload, L2Persist buffer, int64_t budget_bytes);

// True for devices whose clock moves only when driven (ExecDevice::simulated_clock).
bool is_simulated(const ExecDevice& device);

// "sim" or "cuda" (kUnsupported until the CUDA ExecDevice exists).
std::unique_ptr<ExecDevice> make_exec_device(const std::string& name, const SimExecOptions& sim = {});

// "fifo" (RtOrder::kArrival) or "edf" (RtOrder::kDeadline); the parser throws kInvalidArgument
// naming both.
const char* rt_order_name(RtOrder order);
RtOrder rt_order_from_name(std::string_view name);

struct ClientSummary {
  std::string name;
  TaskClass task_class = TaskClass::kBestEffort;
  double hz = 0;
  int64_t batch = 1;
  int64_t completed = 0;
  LatencyStats latency_ms;      // from scheduled arrival
  double throughput_per_s = 0;  // requests finished within the run's duration
  int64_t preemptions = 0;
};

struct WorkloadReport {
  Mode mode = Mode::kReset;
  std::string device;
  double duration_s = 0;
  std::vector<ClientSummary> clients;
  LatencyStats rt_latency_ms;  // every RT request
  // Where RT latency goes, per request: scheduled arrival -> dispatch (admission and input
  // upload on the host), dispatch -> first kernel start (device queueing: what preemption
  // shortens), first kernel start -> last kernel end (service).
  LatencyStats rt_staging_us, rt_queueing_us, rt_service_ms;
  double be_throughput_per_s = 0;
  int64_t preemptions = 0;  // BE tasks preempted with kernels in flight
  // Scheduled arrival -> first kernel start of the RT requests that preempted BE work.
  LatencyStats preemption_latency_us;
  // The same requests' arrival -> dispatch (host staging), and what share of their preemption
  // latency it is: p50 staging / p50 preemption latency, p99 / p99 (0 without preemptions).
  LatencyStats preemption_staging_us;
  double staging_share_p50 = 0, staging_share_p99 = 0;
  int64_t relaunched_kernels = 0;
  int64_t padded_kernels = 0;     // BE kernels run beside RT tasks (padding modes)
  int64_t padded_slices = 0;      // slices of BE kernels run so (padding-slices)
  int64_t padded_capped = 0;      // grid-stride BE kernels run so whole on capped grids (padding-slices)
  int64_t padding_guarded = 0;    // RT tasks run with nothing padded beside them (padding_rt_budget)
  double warmup_s = 0;            // the unmeasured run before (0: none, as on the simulator)
  bool armed_rt = false;          // RT tasks were enqueued before arriving (SchedulerOptions::armed_rt in effect)
  int64_t sentinel_rt_tasks = 0;  // of the measured run's RT tasks, started by the arrival sentinel
  int64_t l2_persisting_bytes = 0;  // the set-aside granted for ColocateOptions::rt_l2 (0: off)
  RtOrder rt_order = RtOrder::kArrival;
  // With ColocateOptions::keep_results only: every request, outputs dropped, in completion order.
  std::vector<TaskResult> results;
};

struct ColocateOptions {
  struct Rt {
    std::string model;
    double hz = 100;                              // periodic arrivals; each request's relative deadline is the period
    std::optional<int64_t> batch = std::nullopt;  // unset: `batch`
  };
  struct Be {
    std::string model;
    std::optional<int64_t> batch = std::nullopt;  // unset: `batch`
  };
  std::vector<Rt> rt;
  std::vector<Be> be;
  Mode mode = Mode::kReset;
  RtOrder rt_order = RtOrder::kArrival;
  double duration_s = 1.0;
  int64_t batch = 1;  // every client without a batch of its own
  uint64_t seed = 0;
  int inflight_cap = 4;
  std::string device = "sim";
  sim::SimGpuConfig sim;
  // Real devices only: every client runs unmeasured in `seq` mode for this long first, so that
  // no measured request pays for CUDA loading a kernel's code at its first launch.
  double warmup_s = 0.3;
  DeviceTime be_queue_ns = 0;  // SchedulerOptions::be_queue_ns
  double padding_rt_budget = 0;  // SchedulerOptions::padding_rt_budget
  RtPath rt_path;
  L2Persist rt_l2 = L2Persist::kOff;  // persist_rt_clients, in the measured run
  int64_t rt_l2_budget_bytes = 0;     // 0: the device's largest set-aside
  // Kernel profiles (atoll profile): a client whose program one belongs to gets it, and on the
  // simulator runs its measured times. The padding modes profile the others on the device.
  std::vector<ModelProfile> profiles;
  // Keeps every request's result in WorkloadReport::results (tests): memory grows with the run.
  bool keep_results = false;
};

// Builds and compiles the zoo models, loads them (RT only in rt-only mode), runs periodic RT
// clients and closed-loop BE clients until every request is answered. A failed request throws.
// Memory is bounded: the RT requests' latencies are kept whole (exact percentiles; at most
// kMaxArrivalsPerClient RT requests in all, refused up front like a rate whose period does not
// fit the run), BE requests are folded as they are answered (LatencySketch: exact for up to
// 65,536 per client, then within 0.05%).
WorkloadReport run_colocate(const ColocateOptions& options);

}  // namespace atl::sched
