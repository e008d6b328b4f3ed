// `atoll colocate`: periodic RT clients and closed-loop BE clients on one device under one mode,
// each request folded into the report as it is answered (Workload::on_outcome), so a run of the
// longest duration holds its RT requests' latencies and a bounded summary of everything else.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/model_source.h"
#include "sched/colocate.h"
#include "sched/latency_sketch.h"
#include "sched/profiles.h"

namespace atl::sched {

namespace {

// RT requests of one colocate run, all RT clients together: each keeps its latencies (exact
// percentiles), up to 48 bytes a request, so about 0.5 GB at the limit.
constexpr int64_t kMaxRtRequests = kMaxArrivalsPerClient;

// What the report needs of the answered requests: RT requests' latencies whole, BE requests as
// counts and a latency sketch per client.
class ColocateTally {
 public:
  ColocateTally(const Workload& w, bool keep_results) : w_(w), keep_results_(keep_results), clients_(w.clients.size()) {
    for (size_t i = 0; i < w.clients.size(); ++i) {
      if (w.clients[i].task_class == TaskClass::kRealTime) {
        clients_[i].latency_ms = LatencySketch(LatencySketch::kUnbounded);
      }
    }
  }

  // Called with the driver's lock held, one request at a time.
  void add(const RequestOutcome& o, DeviceTime run_start) {
    if (o.status != RequestStatus::kServed) {
      if (!error_) error_ = o.error;
      ++unserved_;
      return;
    }
    const TaskResult& r = o.result;
    Client& c = clients_[static_cast<size_t>(r.client)];
    c.latency_ms.add(static_cast<double>(r.latency()) / 1e6);
    c.preemptions += r.preemptions;
    if (r.finish <= run_start + w_.duration) ++c.in_window;
    if (r.task_class == TaskClass::kRealTime) {
      const double staging = static_cast<double>(r.dispatch - r.arrival) / 1e3;
      staging_us_.push_back(staging);
      queueing_us_.push_back(static_cast<double>(r.start - r.dispatch) / 1e3);
      service_ms_.push_back(static_cast<double>(r.finish - r.start) / 1e6);
      if (r.preempted_tasks > 0) {
        preemption_us_.push_back(static_cast<double>(r.start - r.arrival) / 1e3);
        preemption_staging_us_.push_back(staging);
      }
    }
    if (keep_results_) results_.push_back(r);
  }

  // The report's client and RT statistics, once the run is over; rethrows the first failed
  // request's error.
  void fill(WorkloadReport& report) {
    if (error_) std::rethrow_exception(error_);
    ATOLL_CHECK(unserved_ == 0, kInternal, "{} requests were never answered", unserved_);
    const double seconds = static_cast<double>(w_.duration) / 1e9;
    report.clients.resize(w_.clients.size());
    for (size_t i = 0; i < w_.clients.size(); ++i) {
      ClientSummary& s = report.clients[i];
      const Client& c = clients_[i];
      s.name = w_.clients[i].name;
      s.task_class = w_.clients[i].task_class;
      s.completed = c.latency_ms.count();
      s.latency_ms = c.latency_ms.stats();
      s.preemptions = c.preemptions;
      s.throughput_per_s = static_cast<double>(c.in_window) / seconds;
      if (s.task_class == TaskClass::kBestEffort) report.be_throughput_per_s += s.throughput_per_s;
    }
    report.rt_latency_ms = rt_latency_stats();
    report.rt_staging_us = latency_stats(std::move(staging_us_));
    report.rt_queueing_us = latency_stats(std::move(queueing_us_));
    report.rt_service_ms = latency_stats(std::move(service_ms_));
    report.preemption_latency_us = latency_stats(std::move(preemption_us_));
    report.preemption_staging_us = latency_stats(std::move(preemption_staging_us_));
    const auto share = [](double part, double whole) { return whole > 0 ? part / whole : 0.0; };
    report.staging_share_p50 = share(report.preemption_staging_us.median_ms, report.preemption_latency_us.median_ms);
    report.staging_share_p99 = share(report.preemption_staging_us.p99_ms, report.preemption_latency_us.p99_ms);
    std::stable_sort(results_.begin(), results_.end(),
                     [](const TaskResult& a, const TaskResult& b) { return a.finish < b.finish; });
    report.results = std::move(results_);
  }

 private:
  struct Client {
    LatencySketch latency_ms;
    int64_t preemptions = 0;
    int64_t in_window = 0;  // finished within the run's duration
  };

  // Every RT client's latencies together (RT sketches are unbounded: they hold every sample).
  LatencyStats rt_latency_stats() const {
    std::vector<double> all;
    for (size_t i = 0; i < w_.clients.size(); ++i) {
      if (w_.clients[i].task_class != TaskClass::kRealTime) continue;
      const std::vector<double>& mine = clients_[i].latency_ms.samples();
      all.insert(all.end(), mine.begin(), mine.end());
    }
    return latency_stats(std::move(all));
  }

  const Workload& w_;
  bool keep_results_;
  std::vector<Client> clients_;
  std::vector<double> staging_us_, queueing_us_, service_ms_, preemption_us_, preemption_staging_us_;
  std::vector<TaskResult> results_;
  std::exception_ptr error_;  // the first failed request's
  int64_t unserved_ = 0;
};

// One line per problem: rates whose period is no finite time within the run (1e-300 Hz gives an
// infinite one, which used to schedule nothing), and more RT requests than the run may keep.
void check_colocate_options(const ColocateOptions& o) {
  ATOLL_CHECK(!o.rt.empty(), kInvalidArgument, "colocate needs at least one RT model");
  ATOLL_CHECK(std::isfinite(o.duration_s) && o.duration_s > 0 && o.duration_s <= kMaxRunSeconds, kInvalidArgument,
              "duration must be in (0, {}] s (got {} s)", kMaxRunSeconds, o.duration_s);
  ATOLL_CHECK(std::isfinite(o.warmup_s) && o.warmup_s >= 0, kInvalidArgument, "warm-up must not be negative (got {} s)",
              o.warmup_s);
  double requests = 0;
  for (const auto& rt : o.rt) {
    ATOLL_CHECK(std::isfinite(rt.hz) && rt.hz > 0, kInvalidArgument, "RT client '{}' needs a positive rate (got {} Hz)",
                rt.model, rt.hz);
    const double period_s = 1.0 / rt.hz;
    ATOLL_CHECK(period_s <= o.duration_s, kInvalidArgument,
                "RT client '{}' at {} Hz has a period of {:.3g} s, longer than the run's {} s: give a rate of at least "
                "{:.3g} Hz",
                rt.model, rt.hz, period_s, o.duration_s, 1.0 / o.duration_s);
    requests += std::ceil(o.duration_s / period_s);
  }
  ATOLL_CHECK(requests <= static_cast<double>(kMaxRtRequests), kInvalidArgument,
              "the RT clients would schedule {:.3g} requests over {} s, more than the limit of {} per run (each RT "
              "request's latencies are kept); shorten --duration or lower the rates",
              requests, o.duration_s, kMaxRtRequests);
}

// The RT client's arrivals every period from 0 until `duration`, the period its deadline
// (check_colocate_options keeps it finite and within the run).
void schedule_periodic(WorkloadClient& c, const ColocateOptions::Rt& rt, DeviceTime duration) {
  const double period_ns = 1e9 / rt.hz;
  c.relative_deadline = static_cast<DeviceTime>(period_ns);
  c.arrivals = [period_ns, duration, k = int64_t{0}]() mutable -> std::optional<DeviceTime> {
    // In doubles first: k * period_ns may not fit a DeviceTime.
    const double at = std::round(static_cast<double>(k++) * period_ns);
    if (at >= static_cast<double>(duration)) return std::nullopt;
    return static_cast<DeviceTime>(at);
  };
}

// Every client unmeasured in seq mode for `warmup_s`, so no measured request pays for CUDA
// loading a kernel's code at its first launch. Nothing of it is kept.
void warm_up(ExecDevice& device, const Workload& w, double warmup_s) {
  Workload warm = w;
  warm.scheduler.mode = Mode::kSeq;
  warm.duration = static_cast<DeviceTime>(std::llround(warmup_s * 1e9));
  for (WorkloadClient& c : warm.clients) {
    if (!c.arrivals) continue;
    c.arrivals = [next = c.arrivals, end = warm.duration]() mutable -> std::optional<DeviceTime> {
      const std::optional<DeviceTime> at = next();
      return at && *at < end ? at : std::nullopt;
    };
  }
  warm.on_outcome = [](const RequestOutcome&, DeviceTime) {};
  run_workload(device, warm);
}

}  // namespace

WorkloadReport run_colocate(const ColocateOptions& o) {
  check_colocate_options(o);
  const auto batch_of = [&](const std::string& model, const std::optional<int64_t>& batch) {
    const int64_t b = batch.value_or(o.batch);
    ATOLL_CHECK(b >= 1, kInvalidArgument, "client '{}' needs a batch of at least 1 (got {})", model, b);
    return b;
  };
  SimExecOptions sim;
  sim.gpu = o.sim;
  std::unique_ptr<ExecDevice> device = make_exec_device(o.device, sim);
  const bool computes = device->computes();

  Workload w;
  w.duration = static_cast<DeviceTime>(std::llround(o.duration_s * 1e9));
  w.scheduler.mode = o.mode;
  w.scheduler.inflight_cap = o.inflight_cap;
  w.scheduler.be_queue_ns = o.be_queue_ns;
  w.scheduler.padding_rt_budget = o.padding_rt_budget;
  o.rt_path.apply(w);
  w.scheduler.rt_order = o.rt_order;
  w.real_time = !is_simulated(*device);
  std::vector<int64_t> batches;
  std::vector<ModelProfile> profiles = o.profiles;
  auto add = [&](const std::string& model, const std::optional<int64_t>& batch, TaskClass cls) -> WorkloadClient& {
    batches.push_back(batch_of(model, batch));
    const CompiledModel cm = compile_zoo_model({.name = model, .batch = batches.back(), .seed = o.seed},
                                               device->target(), computes, o.inflight_cap);
    WorkloadClient c;
    c.name = model;
    c.task_class = cls;
    c.instance = device->load(cm.program, cm.weights);
    attach_profile(*device, c.instance, profiles, mode_traits(o.mode).pads_be);
    c.inputs = seeded_inputs(cm.program, o.seed);
    w.clients.push_back(std::move(c));
    return w.clients.back();
  };
  for (const auto& rt : o.rt) schedule_periodic(add(rt.model, rt.batch, TaskClass::kRealTime), rt, w.duration);
  if (o.mode != Mode::kRtOnly) {
    for (const auto& be : o.be) add(be.model, be.batch, TaskClass::kBestEffort).closed_loop = true;
  }
  std::vector<const Program*> programs;
  for (const WorkloadClient& c : w.clients) programs.push_back(&device->program(c.instance));
  check_profiles_used(o.profiles, programs);
  // Before the warm-up, so that it fills the persisting lines too.
  const int64_t l2_persisting = persist_rt_clients(*device, w, o.rt_l2, o.rt_l2_budget_bytes);
  const double warmup_s = w.real_time ? o.warmup_s : 0.0;
  if (warmup_s > 0) warm_up(*device, w, warmup_s);
  ColocateTally tally(w, o.keep_results);
  w.on_outcome = [&](const RequestOutcome& outcome, DeviceTime start) { tally.add(outcome, start); };
  const WorkloadRun run = run_workload(*device, w);
  WorkloadReport report;
  report.mode = o.mode;
  report.device = device->name();
  report.duration_s = static_cast<double>(w.duration) / 1e9;
  report.preemptions = run.stats.preemptions;
  report.relaunched_kernels = run.stats.relaunched_kernels;
  report.padded_kernels = run.stats.padded_kernels;
  report.padded_slices = run.stats.padded_slices;
  report.padded_capped = run.stats.padded_capped;
  report.padding_guarded = run.stats.padding_guarded;
  tally.fill(report);
  for (size_t i = 0; i < o.rt.size(); ++i) report.clients[i].hz = o.rt[i].hz;
  for (size_t i = 0; i < batches.size(); ++i) report.clients[i].batch = batches[i];
  report.warmup_s = warmup_s;
  report.armed_rt = run.armed_rt;
  report.sentinel_rt_tasks = run.stats.sentinel_rt_tasks;
  report.l2_persisting_bytes = l2_persisting;
  report.rt_order = o.rt_order;
  return report;
}

}  // namespace atl::sched
