#pragma once
// What one scheduler mode did on one workload, and the statistics DISB reports about it.
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/gpu_clock.h"
#include "bench/host_load.h"
#include "bench/host_stalls.h"
#include "bench/workload.h"
#include "core/stats.h"
#include "sched/colocate.h"
#include "sched/latency_sketch.h"
#include "sched/scheduler.h"

namespace atl::bench {

// 32 bytes: a run keeps one per RT request of every mode (the RT statistics need them whole:
// exact percentiles, the pairing with rt-only, the CDF); other requests fold into a ClientTally.
struct RequestRecord {
  double arrival_ms = 0;  // scheduled arrival (closed loop: when the previous answer came back)
  double start_ms = 0;    // first kernel start
  double finish_ms = 0;
  int32_t client = 0;
  uint16_t preemptions = 0;  // saturates
  bool dropped = false;      // never served within the run
  bool failed = false;
};
static_assert(sizeof(RequestRecord) == 32);

// One client's requests in one mode, folded as they are answered: what its ClientStats need, in
// memory that does not grow with the run (a closed-loop client on a fast model answers tens of
// millions of requests an hour).
struct ClientTally {
  // `exact_latencies`: latencies kept whole before the sketch turns to its histogram.
  explicit ClientTally(size_t exact_latencies = sched::LatencySketch::kExactSamples) : latency_ms(exact_latencies) {}
  void add(const RequestRecord& r, const ClientSpec& spec, double duration_ms);

  int64_t requests = 0, served = 0, dropped = 0, failed = 0;
  int64_t missed = 0;     // dropped, failed, or served later than the client's deadline
  int64_t in_window = 0;  // served within the run's duration
  int64_t preemptions = 0;
  double longest_wait_ms = 0;   // arrival -> first kernel start
  sched::LatencySketch latency_ms;  // from scheduled arrival
};

struct KernelSpan {   // one kernel execution, for the timeline
  std::string track;  // stream name
  std::string name;
  double start_ms = 0, end_ms = 0;
  bool realtime = false;
  bool preempted = false;
};

// Host time in one kind of device call, over a mode's run (TimelineRecorder): a scheduler
// stall shows up as the call it was spent in.
struct DeviceCallStats {
  std::string call;
  int64_t count = 0, over_100us = 0;
  int64_t total_ns = 0, longest_ns = 0;
};

struct InstantEvent {  // preemption raised / BE restored
  std::string track;
  std::string name;
  double at_ms = 0;
};

struct ModeRun {
  std::string mode;
  double duration_ms = 0;
  // Each request is in `requests` or, for a client whose requests are folded (BE clients unless
  // DisbOptions::keep_every_record), in `tallies[client]` (by workload client; may be empty).
  std::vector<RequestRecord> requests;
  std::vector<ClientTally> tallies;
  std::vector<double> preemption_latency_us;  // RT arrival (or flag raise) -> first RT kernel start
  std::vector<double> preemption_staging_us;  // the same requests' arrival -> dispatch (host staging)
  std::vector<double> preemption_reaction_us;  // ... arrival -> the scheduler seeing it (staging's first part)
  std::vector<double> preemption_entry_us;     // ... admitted -> started (sched::TaskResult::started)
  std::vector<double> preemption_release_us;   // ... started -> dispatch
  std::vector<uint8_t> preemption_by_sentinel;  // ... 1 where the arrival sentinel admitted it
  // Those the sentinel admitted, their reaction in its three steps (sched::TaskResult): arrival ->
  // the sentinel reaching it, -> its claim held, -> the gate opened.
  std::vector<double> sentinel_wake_us, sentinel_claim_us, sentinel_open_us;
  sched::PollStats polls;                      // the scheduler's slowest steps
  std::vector<KernelSpan> timeline;           // a window of a few hundred ms
  std::vector<InstantEvent> events;
  std::string first_failure;          // the first failed request's error, empty if none failed
  std::optional<HostLoad> host_load;  // real devices only, where the host reports it
  std::optional<HostStalls> host_stalls;  // real devices only
  std::optional<GpuClockSummary> gpu_clock;  // real devices with NVML only
  std::vector<DeviceCallStats> device_calls;  // every kind called at least once
  std::vector<DeviceCallStats> launches_by_op;  // single-kernel launches by op, most total time first
  bool rt_armed = false;                        // what the run did (sched::WorkloadRun), not what was asked
  int64_t l2_persisting_bytes = 0;              // the set-aside granted for DisbOptions::rt_l2 (0: off)
  int64_t sentinel_rt_tasks = 0;                // RT tasks the arrival sentinel started (SchedulerStats)
  int staged_clients = 0;
  // ATOLL_CUDA_GATE_STAMPS: host store opening an RT lane's hold -> its stream past the hold, and
  // -> the flag written behind it (sched::GateStamps); nullopt where the device does not stamp.
  std::optional<sched::GateStamps> gate_stamps;
};

// A mode's RT p99 against rt-only's on the same workload: ratio - 1, with a conservative 95%
// interval from the two p99 intervals (low / high over high / low).
struct P99Change {
  double change = 0, low = 0, high = 0;
};
P99Change p99_change(const Distribution& mode, const Distribution& rt_only);

struct ClientStats {
  std::string name;
  bool realtime = false;
  int64_t served = 0, dropped = 0, failed = 0;
  Distribution latency_ms;        // from scheduled arrival
  bool latency_exact = true;      // nearest rank over every sample, not the sketch's histogram
  double standalone_p50_ms = 0;   // same model alone, same run
  double p50_increase = 0;        // latency p50 / standalone p50 - 1
  double deadline_miss_rate = 0;  // dropped and late requests over all scheduled
  double throughput_per_s = 0;    // requests finished within the run's duration, per second
  double longest_wait_ms = 0;     // longest arrival -> first kernel start (starvation)
  int64_t preemptions = 0;
};

struct ModeStats {
  std::string mode;
  int64_t requests = 0;  // submitted: served, dropped and failed, every client
  std::vector<ClientStats> clients;
  Distribution rt_latency_ms;  // all RT clients together
  // The RT p99 against rt-only's over the same requests (pair_with_rt_only): arrivals are the
  // same in every mode, so the interval leaves out what both runs share. Empty for rt-only, with
  // no rt-only run, or where too few requests pair.
  std::optional<QuantileChange> rt_p99_paired;
  // The same requests' latency in two parts: arrival -> first kernel start (queueing, staging,
  // preemption), and first kernel start -> last kernel end (the RT work on the device).
  Distribution rt_wait_us, rt_run_ms;
  double rt_throughput = 0, be_throughput = 0, overall_throughput = 0;
  double rt_deadline_miss_rate = 0;
  int64_t preemptions = 0;
  Distribution preemption_latency_us;
  // The preempting requests' staging, and its share of their preemption latency: p50 staging /
  // p50 preemption latency, p99 / p99 (0 without preemptions).
  Distribution preemption_staging_us;
  double staging_share_p50 = 0, staging_share_p99 = 0;
  // Staging's first part: arrival -> the scheduler thread admitting the request (the rest is the
  // input copy and the holds' release).
  Distribution preemption_reaction_us;
  // The reaction split by who admitted the request: the arrival sentinel (it opens the lane at
  // the arrival instant) or the scheduler's thread (between two of its steps).
  Distribution preemption_reaction_sentinel_us, preemption_reaction_scheduler_us;
  // The sentinel's reaction in its steps (ModeRun::sentinel_wake_us and the others).
  Distribution sentinel_wake_us, sentinel_claim_us, sentinel_open_us;
  // Staging's other two parts: admission -> the scheduler starting the task (the RT queue and RT
  // mode entry), and start -> dispatch (the holds opened, the inputs staged).
  Distribution preemption_entry_us, preemption_release_us;
  Distribution gate_passed_us, gate_flag_us;  // ModeRun::gate_stamps (empty where not stamped)
  double longest_be_wait_ms = 0;
};

// The rt-only mode's stats among `stats`, or nullptr.
const ModeStats* find_rt_only(const std::vector<ModeStats>& stats);
// "+3.3% [+1.0, +6.1]": m's RT p99 change against rt-only in `stats` with its 95% interval; "-"
// for rt-only itself, without an rt-only run or without RT samples.
std::string p99_change_text(const ModeStats& m, const std::vector<ModeStats>& stats);

// `standalone_p50_ms` by client index: each RT model's latency alone, measured in the same run.
ModeStats summarize(const Workload& w, const ModeRun& run, const std::vector<double>& standalone_p50_ms);

struct BenchResults {
  Workload workload;
  std::string device;
  std::string commit;
  uint64_t seed = 0;
  double grace_s = 0;             // answers awaited after the arrivals stop; later ones are dropped
  double standalone_s = 0;        // each RT client's run alone
  double warmup_s = 0;            // every client together before the measured runs (0: none)
  int inflight_cap = 0;           // kernels a BE task may have on the device at once
  double be_queue_us = 0;         // SchedulerOptions::be_queue_ns, us (0: off)
  double padding_rt_budget = 0;   // SchedulerOptions::padding_rt_budget (0: off)
  std::string rt_l2 = "off";      // DisbOptions::rt_l2
  int64_t rt_l2_budget_bytes = 0;  // DisbOptions::rt_l2_budget_bytes (0: the device's largest)
  sched::RtPath rt_path;           // what the runs were asked to use (DisbOptions::rt_path)
  std::string rt_order;     // "fifo" or "edf": which waiting RT request runs next
  std::vector<ModeRun> runs;
  std::vector<ModeStats> stats;
};

// The same RT requests (client and scheduled arrival) served in both runs, their latencies
// paired: the RT p99 change of `mode` against `rt_only`, or nullopt where fewer than
// kMinPairedShare of either run's served RT requests pair (arrivals that differ) or none do.
inline constexpr double kMinPairedShare = 0.9;
std::optional<QuantileChange> paired_rt_p99_change(const Workload& w, const ModeRun& mode, const ModeRun& rt_only);
// Sets every other mode's rt_p99_paired against the rt-only run, where there is one.
void pair_with_rt_only(BenchResults& r);

// results.json schema "atoll.disb/1": documented in docs/DISB.md.
nlohmann::json results_json(const BenchResults& r);
std::string results_csv(const BenchResults& r);
std::string perfetto_trace_json(const ModeRun& run);
std::string report_html(const BenchResults& r);

}  // namespace atl::bench
