#include "bench/pairs.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/model_source.h"
#include "sched/colocate.h"
#include "sched/profiles.h"

namespace atl::bench {

namespace {

struct LoadedModel {
  std::string name;
  sched::InstanceId rt = -1, be = -1;  // one instance per role: a client owns its instance
  std::vector<Tensor> inputs;
};

sched::DeviceTime ns_of_s(double s) {
  return static_cast<sched::DeviceTime>(std::llround(s * 1e9));
}

sched::Workload pair_workload(const LoadedModel& rt, const LoadedModel& be, sched::Mode mode, const PairOptions& o,
                              bool real_time, double seconds) {
  sched::Workload w;
  w.duration = ns_of_s(seconds);
  w.real_time = real_time;
  w.scheduler.mode = mode;
  w.scheduler.inflight_cap = o.inflight_cap;
  w.scheduler.padding_rt_budget = o.padding_rt_budget;
  const auto client = [](const LoadedModel& m, sched::TaskClass cls, sched::InstanceId instance) {
    sched::WorkloadClient c;
    c.name = m.name;
    c.task_class = cls;
    c.instance = instance;
    c.closed_loop = true;
    c.inputs = m.inputs;
    return c;
  };
  w.clients.push_back(client(rt, sched::TaskClass::kRealTime, rt.rt));
  if (sched::mode_traits(mode).admits_be) w.clients.push_back(client(be, sched::TaskClass::kBestEffort, be.be));
  return w;
}

// Outcomes are folded in as they are answered (Workload::on_outcome): a long closed-loop pair
// keeps one latency per RT request and a count of BE requests, not every request's record.
PairModeResult run_pair(sched::ExecDevice& device, const LoadedModel& rt, const LoadedModel& be, sched::Mode mode,
                        const PairOptions& o) {
  sched::Workload w = pair_workload(rt, be, mode, o, !sched::is_simulated(device), o.duration_s);
  const sched::DeviceTime duration = w.duration;
  std::vector<double> rt_ms;
  int64_t be_served = 0;
  std::exception_ptr first_error;
  w.on_outcome = [&](const sched::RequestOutcome& q, sched::DeviceTime run_start) {
    if (q.status == sched::RequestStatus::kFailed && !first_error) first_error = q.error;
    if (q.status != sched::RequestStatus::kServed || q.result.finish > run_start + duration) return;
    if (q.result.task_class == sched::TaskClass::kRealTime) {
      rt_ms.push_back(static_cast<double>(q.result.latency()) / 1e6);
    } else {
      ++be_served;
    }
  };
  const sched::WorkloadRun run = sched::run_workload(device, w);
  if (first_error) std::rethrow_exception(first_error);
  PairModeResult r;
  r.rt = rt.name;
  r.be = be.name;
  r.mode = sched::mode_name(mode);
  r.padded_kernels = run.stats.padded_kernels;
  r.padded_slices = run.stats.padded_slices;
  r.padded_capped = run.stats.padded_capped;
  r.padding_guarded = run.stats.padding_guarded;
  r.preemptions = run.stats.preemptions;
  r.be_per_s = static_cast<double>(be_served) / o.duration_s;
  r.rt_per_s = static_cast<double>(rt_ms.size()) / o.duration_s;
  r.rt_latency_ms = latency_stats(std::move(rt_ms));
  return r;
}

nlohmann::json latency_json(const LatencyStats& s) {
  return {{"mean", s.mean_ms}, {"p50", s.median_ms}, {"p99", s.p99_ms}, {"max", s.max_ms}, {"samples", s.samples}};
}

// RT mean latency of `r` over the same pair's rt-only run, in percent.
double rt_overhead_pct(const PairModeResult& r, const PairModeResult& alone) {
  return 100.0 * (r.rt_latency_ms.mean_ms / alone.rt_latency_ms.mean_ms - 1.0);
}

}  // namespace

PairResults run_pairs(const PairOptions& o) {
  ATOLL_CHECK(!o.models.empty() && !o.modes.empty(), kInvalidArgument, "the pair benchmark needs models and modes");
  ATOLL_CHECK(std::isfinite(o.duration_s) && o.duration_s > 0, kInvalidArgument, "duration must be positive (got {} s)",
              o.duration_s);
  std::unique_ptr<sched::ExecDevice> device = sched::make_exec_device(o.device, o.sim);
  const bool computes = !sched::is_simulated(*device);
  const bool pads =
      std::any_of(o.modes.begin(), o.modes.end(), [](sched::Mode m) { return sched::mode_traits(m).pads_be; });
  std::vector<ModelProfile> profiles = o.profiles;
  std::vector<LoadedModel> loaded;
  for (const std::string& name : o.models) {
    if (o.on_progress) o.on_progress(fmt::format("loading {}", name));
    const CompiledModel cm =
        compile_zoo_model({.name = name, .batch = o.batch, .seed = o.seed}, device->target(), computes, o.inflight_cap);
    LoadedModel m{name, device->load(cm.program, cm.weights), device->load(cm.program, cm.weights),
                  seeded_inputs(cm.program, o.seed)};
    sched::attach_profile(*device, m.rt, profiles, pads);
    sched::attach_profile(*device, m.be, profiles, pads);
    loaded.push_back(std::move(m));
  }
  std::vector<const Program*> programs;
  for (const LoadedModel& m : loaded) programs.push_back(&device->program(m.rt));
  sched::check_profiles_used(o.profiles, programs);
  PairResults results;
  results.device = device->description();
  results.duration_s = o.duration_s;
  results.batch = o.batch;
  results.padding_rt_budget = o.padding_rt_budget;
  for (const LoadedModel& rt : loaded) {
    for (const LoadedModel& be : loaded) {
      if (computes && o.warmup_s > 0) {
        sched::run_workload(*device, pair_workload(rt, be, sched::Mode::kSeq, o, true, o.warmup_s));
      }
      for (sched::Mode mode : o.modes) {
        if (o.on_progress) o.on_progress(fmt::format("RT {} + BE {}: {}", rt.name, be.name, sched::mode_name(mode)));
        results.runs.push_back(run_pair(*device, rt, be, mode, o));
      }
    }
  }
  results.summary = summarize_pairs(results.runs, o.modes);
  results.winners = pair_winners(results.runs, kWinnerRtBudgetPct);
  return results;
}

std::vector<PairWinner> pair_winners(const std::vector<PairModeResult>& runs, double rt_budget_pct) {
  std::vector<PairWinner> out;
  for (const PairModeResult& alone : runs) {
    if (alone.mode != sched::mode_name(sched::Mode::kRtOnly) || alone.rt_latency_ms.mean_ms <= 0) continue;
    PairWinner best{alone.rt, alone.be, alone.mode, 0.0, alone.overall_per_s()};
    for (const PairModeResult& r : runs) {
      if (r.rt != alone.rt || r.be != alone.be || r.overall_per_s() <= best.overall_per_s) continue;
      const double pct = rt_overhead_pct(r, alone);
      if (pct <= rt_budget_pct) best = PairWinner{r.rt, r.be, r.mode, pct, r.overall_per_s()};
    }
    out.push_back(best);
  }
  return out;
}

std::vector<PairModeSummary> summarize_pairs(const std::vector<PairModeResult>& runs,
                                             const std::vector<sched::Mode>& modes) {
  std::map<std::tuple<std::string, std::string, std::string>, const PairModeResult*> by_key;
  for (const PairModeResult& r : runs) by_key[{r.rt, r.be, r.mode}] = &r;
  const auto baseline = [&](const PairModeResult& r, sched::Mode m) -> const PairModeResult* {
    const auto it = by_key.find({r.rt, r.be, sched::mode_name(m)});
    return it == by_key.end() ? nullptr : it->second;
  };
  std::vector<PairModeSummary> out;
  for (sched::Mode mode : modes) {
    PairModeSummary s;
    s.mode = sched::mode_name(mode);
    int with_rt_only = 0, with_reset = 0, with_streams = 0;
    for (const PairModeResult& r : runs) {
      if (r.mode != s.mode) continue;
      if (const PairModeResult* alone = baseline(r, sched::Mode::kRtOnly); alone && alone->rt_latency_ms.mean_ms > 0) {
        const double pct = rt_overhead_pct(r, *alone);
        s.rt_overhead_mean_pct += pct;
        s.rt_overhead_worst_pct = with_rt_only == 0 ? pct : std::max(s.rt_overhead_worst_pct, pct);
        ++with_rt_only;
      }
      if (const PairModeResult* reset = baseline(r, sched::Mode::kReset); reset && reset->overall_per_s() > 0) {
        s.throughput_vs_reset += r.overall_per_s() / reset->overall_per_s();
        ++with_reset;
      }
      if (const PairModeResult* streams = baseline(r, sched::Mode::kStreams); streams && streams->overall_per_s() > 0) {
        s.throughput_vs_streams += r.overall_per_s() / streams->overall_per_s();
        ++with_streams;
      }
    }
    if (with_rt_only > 0) s.rt_overhead_mean_pct /= with_rt_only;
    if (with_reset > 0) s.throughput_vs_reset /= with_reset;
    if (with_streams > 0) s.throughput_vs_streams /= with_streams;
    out.push_back(s);
  }
  return out;
}

std::string pairs_to_json(const PairResults& r) {
  nlohmann::json j{{"device", r.device}, {"duration_s", r.duration_s}, {"batch", r.batch},
                   {"padding_rt_budget", r.padding_rt_budget}};
  j["runs"] = nlohmann::json::array();
  for (const PairModeResult& p : r.runs) {
    j["runs"].push_back({{"rt", p.rt},
                         {"be", p.be},
                         {"mode", p.mode},
                         {"rt_latency_ms", latency_json(p.rt_latency_ms)},
                         {"rt_per_s", p.rt_per_s},
                         {"be_per_s", p.be_per_s},
                         {"overall_per_s", p.overall_per_s()},
                         {"padded_kernels", p.padded_kernels},
                         {"padded_slices", p.padded_slices},
                         {"padded_capped", p.padded_capped},
                         {"padding_guarded", p.padding_guarded},
                         {"preemptions", p.preemptions}});
  }
  j["winners_rt_budget_pct"] = kWinnerRtBudgetPct;
  j["winners"] = nlohmann::json::array();
  for (const PairWinner& w : r.winners) {
    j["winners"].push_back({{"rt", w.rt},
                            {"be", w.be},
                            {"mode", w.mode},
                            {"rt_overhead_pct", w.rt_overhead_pct},
                            {"overall_per_s", w.overall_per_s}});
  }
  j["summary"] = nlohmann::json::array();
  for (const PairModeSummary& s : r.summary) {
    j["summary"].push_back({{"mode", s.mode},
                            {"rt_overhead_mean_pct", s.rt_overhead_mean_pct},
                            {"rt_overhead_worst_pct", s.rt_overhead_worst_pct},
                            {"throughput_vs_reset", s.throughput_vs_reset},
                            {"throughput_vs_streams", s.throughput_vs_streams}});
  }
  return j.dump(1) + "\n";
}

}  // namespace atl::bench
