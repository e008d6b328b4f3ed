#pragma once
// The DISB runner: one workload under every scheduling mode, one mode after the other, each on
// a fresh device, plus each RT client alone for its standalone latency. Requests arrive at
// their scheduled times whether or not the device keeps up, latency counts from the scheduled
// arrival, and a request not answered by the end of the run and its grace period is dropped.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/results.h"
#include "bench/workload.h"
#include "sched/colocate.h"
#include "sched/scheduler.h"

namespace atl::bench {

struct DisbProgress {
  std::string workload;
  std::string phase;   // "compile", "warm-up", "standalone <client>" or a mode name
  int mode_index = 0;  // 1-based among the modes; 0 before the first mode
  int mode_count = 0;
  double seconds_left = 0;  // of this phase's run, in device time (simulated time on the simulator)
};

struct DisbOptions {
  std::vector<sched::Mode> modes = sched::all_modes();
  double duration_s = 30;   // each mode's arrivals, at most sched::kMaxRunSeconds
  double standalone_s = 2;  // each RT client alone (at most duration_s)
  // Every client together, unmeasured, before anything is measured, on real devices only: CUDA
  // loads a kernel's code at its first launch (lazy loading), which can synchronize the whole
  // device; without this the first mode running each model would pay for it.
  double warmup_s = 0.3;
  double grace_s = 0.5;                                   // answers awaited after the arrivals stop
  double timeline_ms = 200;                               // trace.json window, centred in the traced mode's run
  uint64_t seed = 0;                                      // Poisson arrivals, inputs, weights
  int inflight_cap = 4;                                   // SchedulerOptions::inflight_cap
  // RT clients' buffer kept persisting in L2 in every mode (ExecDevice::set_l2_persistence), with
  // a set-aside of rt_l2_budget_bytes (0: the device's largest). Needs a device with L2 control.
  L2Persist rt_l2 = L2Persist::kOff;
  int64_t rt_l2_budget_bytes = 0;
  sched::DeviceTime be_queue_ns = 0;                      // SchedulerOptions::be_queue_ns
  double padding_rt_budget = 0;                           // SchedulerOptions::padding_rt_budget
  sched::RtPath rt_path;
  // Which waiting RT request runs next; EDF reads each client's deadline_ms (none: never due).
  sched::RtOrder rt_order = sched::RtOrder::kArrival;
  std::string device = "sim";  // sim or cuda, through sched::make_exec_device
  sched::SimExecOptions sim;
  std::string commit;  // recorded in results.json
  // Makes each run's device instead of `device` (a test's wall-clock device).
  std::function<std::unique_ptr<sched::ExecDevice>()> make_device;
  std::function<void(const DisbProgress&)> on_progress;
  // Kernel profiles (atoll profile), given to the clients whose programs they belong to in every
  // run (the simulator then runs their measured times); the padding modes profile the others
  // on the device once and reuse that.
  std::vector<ModelProfile> profiles;
  // Keeps a RequestRecord of every request, BE clients' too, instead of folding those into
  // ModeRun::tallies (tests that check each request): memory then grows with the run.
  bool keep_every_record = false;
};

// What a run keeps of its RT requests, estimated before it starts from each RT client's
// expected requests (rate x duration): a 32-byte record per request in every mode, up to 72
// bytes more in the preemptive modes (wait, reset, padding-concurrent: its preemption samples),
// and 64 more for one mode's worth of working copies (its statistics, the pairing with
// rt-only). Every shipped workload at the maximum duration (sched::kMaxRunSeconds) needs well
// under this; a run that would need more is refused before anything compiles (docs/DISB.md,
// "Memory").
inline constexpr double kMaxRecordBytes = 768.0 * 1024 * 1024;
double record_bytes_estimate(const Workload& workload, const DisbOptions& options);
// Throws kInvalidArgument, naming the estimate and the limit, when it exceeds kMaxRecordBytes.
void check_record_bytes(const Workload& workload, const DisbOptions& options);

// The workloads shipped in bench/workloads: A B C D E F G REAL.
std::vector<std::string> shipped_workloads();

// `name_or_path` is a shipped workload's name, looked up in `search_dirs` in order, or a path to
// a JSON file. Every client's model must be in the zoo; errors name the file, client and model.
Workload load_disb_workload(const std::string& name_or_path, const std::vector<std::string>& search_dirs);

// The traced mode (reset if it runs, otherwise the last) keeps a timeline of `timeline_ms`.
BenchResults run_disb(const Workload& workload, const DisbOptions& options);

// Writes results.json, results.csv, report.html and trace.json as `dir`, replacing an earlier set
// there as a whole (see write_dir_atomic).
void write_disb_outputs(const BenchResults& results, const std::string& dir);
// Throws kIo when write_disb_outputs would refuse `dir` (it holds other files), before any run.
void check_disb_output_dir(const std::string& dir);

}  // namespace atl::bench
