#include "bench/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <tuple>

#include "bench/gpu_clock.h"
#include "bench/timeline_recorder.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "models/zoo.h"
#include "runtime/model_source.h"
#include "sched/profiles.h"

namespace atl::bench {

namespace {

constexpr int kClockSampleMs = 20;  // NVML's clock reading costs tens of microseconds of a spare core

sched::DeviceTime ns_of_ms(double ms) {
  return static_cast<sched::DeviceTime>(std::llround(ms * 1e6));
}

double ms_between(sched::DeviceTime from, sched::DeviceTime to) {
  return static_cast<double>(to - from) / 1e6;
}

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return fmt::format("{}: {}", error_code_name(e.code()), e.message());
  } catch (const std::exception& e) {
    return e.what();
  }
}

void check_models(const Workload& w, const std::string& source) {
  for (size_t i = 0; i < w.clients.size(); ++i) {
    const ClientSpec& c = w.clients[i];
    try {
      check_model_exists(c.model);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("workload '{}': client '{}' (clients[{}].model): {}", source, c.name, i,
                                        e.message()),
                  e.file(), e.line());
    }
  }
}

// The mode whose run keeps a timeline: reset if it runs, otherwise the last.
size_t traced_index(const std::vector<std::string>& modes) {
  const auto it = std::find(modes.begin(), modes.end(), sched::mode_name(sched::Mode::kReset));
  return it != modes.end() ? static_cast<size_t>(it - modes.begin()) : modes.size() - 1;
}

class Runner {
 public:
  Runner(const Workload& w, const DisbOptions& o) : w_(w), o_(o), profiles_(o.profiles) {
    ATOLL_CHECK(!o.modes.empty(), kInvalidArgument, "DISB needs at least one scheduling mode");
    ATOLL_CHECK(std::isfinite(o.duration_s) && o.duration_s > 0 && o.duration_s <= sched::kMaxRunSeconds,
                kInvalidArgument, "duration must be in (0, {}] s (got {} s)", sched::kMaxRunSeconds, o.duration_s);
    ATOLL_CHECK(std::isfinite(o.standalone_s) && o.standalone_s > 0, kInvalidArgument,
                "standalone duration must be positive (got {} s)", o.standalone_s);
    ATOLL_CHECK(std::isfinite(o.warmup_s) && o.warmup_s >= 0, kInvalidArgument,
                "warm-up must not be negative (got {} s)", o.warmup_s);
    ATOLL_CHECK(std::isfinite(o.grace_s) && o.grace_s >= 0, kInvalidArgument,
                "grace period must not be negative (got {} s)", o.grace_s);
    ATOLL_CHECK(std::isfinite(o.timeline_ms) && o.timeline_ms >= 0, kInvalidArgument,
                "timeline must not be negative (got {} ms)", o.timeline_ms);
  }

  BenchResults run() {
    // Before anything compiles: a run whose schedule is too long, or whose RT records would not
    // fit the limit, fails at once, not after hours.
    for (const ClientSpec& c : w_.clients) check_arrival_count(c, std::max(o_.duration_s, o_.warmup_s) * 1000.0);
    check_record_bytes(w_, o_);
    BenchResults r;
    r.workload = w_;
    r.commit = o_.commit;
    r.seed = o_.seed;
    r.grace_s = o_.grace_s;
    r.standalone_s = std::min(o_.standalone_s, o_.duration_s);
    r.inflight_cap = o_.inflight_cap;
    r.be_queue_us = static_cast<double>(o_.be_queue_ns) / 1e3;
    r.padding_rt_budget = o_.padding_rt_budget;
    r.rt_l2 = l2_persist_name(o_.rt_l2);
    r.rt_l2_budget_bytes = o_.rt_l2_budget_bytes;
    r.rt_path = o_.rt_path;
    r.rt_order = sched::rt_order_name(o_.rt_order);
    progress_.workload = w_.name;
    progress_.mode_count = static_cast<int>(o_.modes.size());
    {
      // Fails early for a device this build cannot drive, before anything compiles.
      const std::unique_ptr<sched::ExecDevice> probe = new_device();
      r.device = fmt::format("{}: {}", probe->name(), probe->description());
      r.warmup_s = sched::is_simulated(*probe) ? 0.0 : o_.warmup_s;
      set_phase("compile", 0);
      for (const ClientSpec& c : w_.clients) prepare(c, *probe);
    }
    if (r.warmup_s > 0) {
      set_phase("warm-up", r.warmup_s);
      std::vector<size_t> everyone(w_.clients.size());
      std::iota(everyone.begin(), everyone.end(), size_t{0});
      run_one(sched::Mode::kSeq, everyone, r.warmup_s * 1000.0, false);
    }
    std::vector<double> standalone_p50(w_.clients.size(), 0.0);
    for (size_t c = 0; c < w_.clients.size(); ++c) {
      if (!w_.clients[c].realtime) continue;
      set_phase("standalone " + w_.clients[c].name, r.standalone_s);
      const ModeRun alone = run_one(sched::Mode::kRtOnly, {c}, r.standalone_s * 1000.0, false);
      std::vector<double> latency;
      for (const RequestRecord& q : alone.requests) {
        if (!q.dropped && !q.failed) latency.push_back(q.finish_ms - q.arrival_ms);
      }
      standalone_p50[c] = distribution(latency).p50;
    }
    std::vector<std::string> names;
    for (sched::Mode m : o_.modes) names.push_back(sched::mode_name(m));
    const size_t traced = traced_index(names);
    for (size_t i = 0; i < o_.modes.size(); ++i) {
      const sched::Mode mode = o_.modes[i];
      std::vector<size_t> clients;
      for (size_t c = 0; c < w_.clients.size(); ++c) {
        if (mode != sched::Mode::kRtOnly || w_.clients[c].realtime) clients.push_back(c);
      }
      set_phase(names[i], o_.duration_s, static_cast<int>(i) + 1);
      r.runs.push_back(run_one(mode, clients, o_.duration_s * 1000.0, i == traced));
      r.stats.push_back(summarize(w_, r.runs.back(), standalone_p50));
    }
    pair_with_rt_only(r);
    return r;
  }

 private:
  struct Prepared {
    CompiledModel compiled;
    std::vector<Tensor> inputs;
  };

  std::unique_ptr<sched::ExecDevice> new_device() const {
    return o_.make_device ? o_.make_device() : sched::make_exec_device(o_.device, o_.sim);
  }

  // One compilation per model, batch and sequence length, reused by every run's fresh device.
  const Prepared& prepare(const ClientSpec& c, const sched::ExecDevice& device) {
    const auto key = std::make_tuple(c.model, c.batch, c.seq_len);
    auto it = models_.find(key);
    if (it != models_.end()) return it->second;
    Prepared p;
    const bool computes = device.computes();
    const ZooModel model{.name = c.model, .batch = c.batch, .seed = o_.seed, .seq_len = c.seq_len};
    p.compiled = compile_zoo_model(model, device.target(), computes, o_.inflight_cap);
    p.inputs = seeded_inputs(p.compiled.program, o_.seed);
    return models_.emplace(key, std::move(p)).first->second;
  }

  void set_phase(std::string phase, double seconds, int mode_index = 0) {
    progress_.phase = std::move(phase);
    progress_.mode_index = mode_index;
    progress_.seconds_left = seconds;
    if (o_.on_progress) o_.on_progress(progress_);
  }

  ModeRun run_one(sched::Mode mode, const std::vector<size_t>& clients, double duration_ms, bool traced) {
    std::unique_ptr<sched::ExecDevice> device = new_device();
    sched::Workload sw;
    sw.duration = ns_of_ms(duration_ms);
    sw.grace = ns_of_ms(o_.grace_s * 1000.0);
    sw.real_time = !sched::is_simulated(*device);
    sw.scheduler.mode = mode;
    sw.scheduler.inflight_cap = o_.inflight_cap;
    sw.scheduler.be_queue_ns = o_.be_queue_ns;
    sw.scheduler.padding_rt_budget = o_.padding_rt_budget;
    o_.rt_path.apply(sw);
    sw.scheduler.rt_order = o_.rt_order;
    sw.scheduler.record_events = traced;
    for (size_t c : clients) {
      const ClientSpec& spec = w_.clients[c];
      const Prepared& p = prepare(spec, *device);
      sched::WorkloadClient wc;
      wc.name = spec.name;
      wc.task_class = spec.realtime ? sched::TaskClass::kRealTime : sched::TaskClass::kBestEffort;
      wc.instance = device->load(p.compiled.program, p.compiled.weights);
      sched::attach_profile(*device, wc.instance, profiles_, sched::mode_traits(mode).pads_be);
      wc.closed_loop = spec.load == LoadType::kClosedLoop;
      wc.concurrency = spec.concurrency;
      if (!wc.closed_loop) wc.arrivals = arrival_stream(spec, duration_ms, sw.duration);
      // A deadline past the DeviceTime range is never due.
      if (spec.deadline_ms) {
        wc.relative_deadline = *spec.deadline_ms * 1e6 < static_cast<double>(sched::kNever)
                                   ? ns_of_ms(*spec.deadline_ms)
                                   : sched::kNever;
      }
      wc.inputs = p.inputs;
      sw.clients.push_back(std::move(wc));
    }
    const int64_t l2_persisting = sched::persist_rt_clients(*device, sw, o_.rt_l2, o_.rt_l2_budget_bytes);
    sw.on_progress = [this](sched::DeviceTime remaining) {
      progress_.seconds_left = static_cast<double>(remaining) / 1e9;
      if (o_.on_progress) o_.on_progress(progress_);
    };

    // Loading takes time on a real device, so the window is placed from the clock after it.
    const double window_from_ms = std::max(0.0, (duration_ms - o_.timeline_ms) / 2.0);
    const sched::DeviceTime origin = device->now();
    // Every mode runs through the recorder, which times the device calls; only the traced mode
    // has a window.
    const sched::DeviceTime window_from = traced ? origin + ns_of_ms(window_from_ms) : 0;
    TimelineRecorder recorder(*device, window_from, traced ? window_from + ns_of_ms(o_.timeline_ms) : 0);
    // The scheduler keeps the window's events only (add_timeline reads no others); a second past
    // it covers a real device's run starting a little after `origin`.
    sw.scheduler.events_from = window_from;
    sw.scheduler.events_until = window_from + ns_of_ms(o_.timeline_ms + 1000.0);
    for (size_t i = 0; i < clients.size(); ++i) {
      recorder.label(sw.clients[i].instance, sw.clients[i].name, w_.clients[clients[i]].realtime);
    }
    ModeRun run = empty_run(mode, clients, duration_ms);
    // Records are made as requests are answered: the run never holds every request's full result.
    sw.on_outcome = [&](const sched::RequestOutcome& o, sched::DeviceTime start) { record(run, clients, o, start); };
    const std::optional<CpuTimes> cpu_before = sw.real_time ? read_cpu_times() : std::nullopt;
    GpuClockSampler clock(sw.real_time ? device->pci_bus_id() : std::string(), kClockSampleMs);
    HostStallWatch stalls(sw.real_time);
    device->take_gate_stamps();  // the mode's own only, not the warm-up's
    const sched::WorkloadRun wr = sched::run_workload(recorder, sw);
    run.gate_stamps = device->take_gate_stamps();
    run.polls = wr.stats.polls;
    run.rt_armed = wr.armed_rt;
    run.l2_persisting_bytes = l2_persisting;
    run.sentinel_rt_tasks = wr.stats.sentinel_rt_tasks;
    run.staged_clients = wr.staged_clients;
    if (sw.real_time) {  // host times mean nothing on the simulator
      run.device_calls = recorder.call_stats();
      run.launches_by_op = recorder.launch_stats_by_op();
    }
    if (traced) add_timeline(run, wr, recorder, window_from_ms);
    run.gpu_clock = clock.stop();
    run.host_stalls = stalls.stop();
    if (sw.real_time) run.host_load = host_load(cpu_before, read_cpu_times());
    return run;
  }

  // `spec`'s arrivals within `duration_ms`, drawn as the run reaches them, in whole ns before `end`.
  sched::ArrivalStream arrival_stream(const ClientSpec& spec, double duration_ms, sched::DeviceTime end) const {
    return [times = ArrivalTimes(spec, duration_ms, o_.seed), end]() mutable -> std::optional<sched::DeviceTime> {
      const std::optional<double> t = times.next();
      if (!t) return std::nullopt;
      return std::min(ns_of_ms(*t), end - 1);
    };
  }

  // A mode's run before any request: a tally per client (bounded where its requests fold), and
  // room for the RT requests' records (and their preemption samples in the preemptive modes)
  // reserved up front, so no vector doubles past what the record estimate allows (pages never
  // written cost nothing).
  ModeRun empty_run(sched::Mode mode, const std::vector<size_t>& clients, double duration_ms) const {
    ModeRun run;
    run.mode = sched::mode_name(mode);
    run.duration_ms = duration_ms;
    double rt_requests = 0;
    for (size_t c = 0; c < w_.clients.size(); ++c) {
      const ClientSpec& spec = w_.clients[c];
      run.tallies.emplace_back(folds(spec) ? sched::LatencySketch::kExactSamples : sched::LatencySketch::kUnbounded);
      if (spec.realtime && std::find(clients.begin(), clients.end(), c) != clients.end()) {
        rt_requests += expected_arrivals(spec, duration_ms);
      }
    }
    // Poisson counts run a few standard deviations past their mean.
    const auto room = static_cast<size_t>(rt_requests + 5 * std::sqrt(rt_requests) + 64);
    if (!o_.keep_every_record) run.requests.reserve(room);
    if (sched::mode_traits(mode).preemptive) {
      for (std::vector<double>* v :
           {&run.preemption_latency_us, &run.preemption_staging_us, &run.preemption_reaction_us,
            &run.preemption_entry_us, &run.preemption_release_us, &run.sentinel_wake_us, &run.sentinel_claim_us,
            &run.sentinel_open_us}) {
        v->reserve(room);
      }
      run.preemption_by_sentinel.reserve(room);
    }
    return run;
  }

  // Whether `spec`'s requests fold into its tally instead of each keeping a record.
  bool folds(const ClientSpec& spec) const { return !spec.realtime && !o_.keep_every_record; }

  void record(ModeRun& run, const std::vector<size_t>& clients, const sched::RequestOutcome& o,
              sched::DeviceTime start) const {
    const sched::TaskResult& t = o.result;
    RequestRecord q;
    q.client = static_cast<int>(clients[static_cast<size_t>(t.client)]);
    q.arrival_ms = ms_between(start, t.arrival);
    q.dropped = o.status == sched::RequestStatus::kDropped;
    q.failed = o.status == sched::RequestStatus::kFailed;
    if (q.failed && run.first_failure.empty()) run.first_failure = message_of(o.error);
    if (o.status == sched::RequestStatus::kServed) {
      q.start_ms = ms_between(start, t.start);
      q.finish_ms = ms_between(start, t.finish);
      q.preemptions = static_cast<uint16_t>(std::min(t.preemptions, int{UINT16_MAX}));
      if (t.task_class == sched::TaskClass::kRealTime && t.preempted_tasks > 0) {
        run.preemption_latency_us.push_back(static_cast<double>(t.start - t.arrival) / 1e3);
        run.preemption_staging_us.push_back(static_cast<double>(t.dispatch - t.arrival) / 1e3);
        run.preemption_reaction_us.push_back(static_cast<double>(t.admitted - t.arrival) / 1e3);
        run.preemption_entry_us.push_back(static_cast<double>(t.started - t.admitted) / 1e3);
        run.preemption_release_us.push_back(static_cast<double>(t.dispatch - t.started) / 1e3);
        run.preemption_by_sentinel.push_back(t.by_sentinel ? 1 : 0);
        if (t.by_sentinel) {
          run.sentinel_wake_us.push_back(static_cast<double>(t.sentinel_reached - t.arrival) / 1e3);
          run.sentinel_claim_us.push_back(static_cast<double>(t.sentinel_claimed - t.sentinel_reached) / 1e3);
          run.sentinel_open_us.push_back(static_cast<double>(t.admitted - t.sentinel_claimed) / 1e3);
        }
      }
    }
    const ClientSpec& spec = w_.clients[static_cast<size_t>(q.client)];
    if (folds(spec)) {
      run.tallies[static_cast<size_t>(q.client)].add(q, spec, run.duration_ms);
    } else {
      run.requests.push_back(q);
    }
  }

  void add_timeline(ModeRun& run, const sched::WorkloadRun& wr, const TimelineRecorder& recorder,
                    double window_from_ms) const {
    run.timeline = recorder.spans(wr.start);
    const double window_to_ms = window_from_ms + o_.timeline_ms;
    bool preempting = false;  // the last RT-mode entry preempted BE work
    for (const sched::SchedulerEvent& e : wr.events) {
      const double at = ms_between(wr.start, e.at);
      const bool in_window = at >= window_from_ms && at < window_to_ms;
      if (e.kind == sched::SchedulerEvent::Kind::kRtModeEnter) {
        preempting = e.preempted > 0;
        if (preempting && in_window) {
          run.events.push_back({"scheduler", fmt::format("preempt {} BE", e.preempted), at});
        }
      } else if (preempting) {
        if (in_window) run.events.push_back({"scheduler", "restore BE", at});
        preempting = false;
      }
    }
  }

  const Workload& w_;
  const DisbOptions& o_;
  std::map<std::tuple<std::string, int64_t, int64_t>, Prepared> models_;
  std::vector<ModelProfile> profiles_;  // given, then measured for the padding modes
  DisbProgress progress_;
};

}  // namespace

std::vector<std::string> shipped_workloads() {
  return {"A", "B", "C", "D", "E", "F", "G", "REAL"};
}

Workload load_disb_workload(const std::string& name_or_path, const std::vector<std::string>& search_dirs) {
  const std::vector<std::string> shipped = shipped_workloads();
  std::string path = name_or_path;
  const bool is_shipped = std::find(shipped.begin(), shipped.end(), name_or_path) != shipped.end();
  if (!is_shipped && !std::filesystem::exists(path)) {
    std::string names;
    for (const std::string& n : shipped) names += (names.empty() ? "" : ", ") + n;
    ATOLL_THROW(kNotFound, "workload '{}' is neither a shipped workload ({}) nor a file", name_or_path, names);
  }
  if (is_shipped) {
    std::string searched;
    path.clear();
    for (const std::string& dir : search_dirs) {
      const std::filesystem::path candidate = std::filesystem::path(dir) / (name_or_path + ".json");
      if (std::filesystem::is_regular_file(candidate)) {
        path = candidate.string();
        break;
      }
      searched += (searched.empty() ? "" : ", ") + dir;
    }
    ATOLL_CHECK(!path.empty(), kNotFound,
                "shipped workload '{}' not found (looked in: {}); set ATOLL_WORKLOADS_DIR to atoll's bench/workloads",
                name_or_path, searched);
  }
  Workload w = load_workload(path);
  check_models(w, path);
  return w;
}

double record_bytes_estimate(const Workload& workload, const DisbOptions& options) {
  constexpr double kRecord = 32, kPreemption = 72, kWorking = 64;  // bytes per RT request (runner.h)
  double per_mode = 0;  // every mode runs every RT client
  for (const ClientSpec& c : workload.clients) {
    if (c.realtime) per_mode += expected_arrivals(c, options.duration_s * 1000.0);
  }
  double bytes = options.modes.empty() ? 0.0 : per_mode * kWorking;
  for (sched::Mode m : options.modes) {
    bytes += per_mode * (kRecord + (sched::mode_traits(m).preemptive ? kPreemption : 0));
  }
  return bytes;
}

void check_record_bytes(const Workload& workload, const DisbOptions& options) {
  const double bytes = record_bytes_estimate(workload, options);
  constexpr double kMiB = 1024.0 * 1024.0;
  ATOLL_CHECK(bytes <= kMaxRecordBytes, kInvalidArgument,
              "workload '{}': {} mode(s) of {} s would keep about {:.0f} MiB of RT request records, more than the "
              "limit of {:.0f} MiB (docs/DISB.md, \"Memory\"); shorten --duration, run fewer --modes or lower the RT "
              "rates",
              workload.name, options.modes.size(), options.duration_s, bytes / kMiB, kMaxRecordBytes / kMiB);
}

BenchResults run_disb(const Workload& workload, const DisbOptions& options) {
  return Runner(workload, options).run();
}

void check_disb_output_dir(const std::string& dir) {
  check_dir_replaceable(dir, {"results.json", "results.csv", "report.html", "trace.json"});
}

void write_disb_outputs(const BenchResults& results, const std::string& dir) {
  ATOLL_CHECK(!results.runs.empty(), kInvalidArgument, "no mode ran: nothing to write to '{}'", dir);
  std::vector<std::string> modes;
  for (const ModeRun& r : results.runs) modes.push_back(r.mode);
  // One set per run: a reader never finds one run's results beside another's trace.
  write_dir_atomic(dir, {{"results.json", results_json(results).dump(2) + "\n"},
                         {"results.csv", results_csv(results)},
                         {"report.html", report_html(results)},
                         {"trace.json", perfetto_trace_json(results.runs[traced_index(modes)])}});
}

}  // namespace atl::bench
