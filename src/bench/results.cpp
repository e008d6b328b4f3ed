#include "bench/results.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/env.h"
#include "core/error.h"
#include "core/text.h"

namespace atl::bench {

P99Change p99_change(const Distribution& mode, const Distribution& rt_only) {
  P99Change c;
  if (rt_only.p99 <= 0 || rt_only.p99_low <= 0) return c;
  c.change = mode.p99 / rt_only.p99 - 1.0;
  c.low = mode.p99_low / rt_only.p99_high - 1.0;
  c.high = mode.p99_high / rt_only.p99_low - 1.0;
  return c;
}

const ModeStats* find_rt_only(const std::vector<ModeStats>& stats) {
  for (const ModeStats& m : stats) {
    if (m.mode == "rt-only") return &m;
  }
  return nullptr;
}

std::string p99_change_text(const ModeStats& m, const std::vector<ModeStats>& stats) {
  const ModeStats* base = find_rt_only(stats);
  if (base == nullptr || base == &m || m.rt_latency_ms.count == 0) return "-";
  if (const auto& p = m.rt_p99_paired) {
    return fmt::format("{:+.1f}% [{:+.1f}, {:+.1f}] paired", 100 * p->change, 100 * p->low, 100 * p->high);
  }
  const P99Change c = p99_change(m.rt_latency_ms, base->rt_latency_ms);
  return fmt::format("{:+.1f}% [{:+.1f}, {:+.1f}]", 100 * c.change, 100 * c.low, 100 * c.high);
}

namespace {

// A served RT request of an open-loop client: which, its scheduled arrival, its latency.
struct RtLatency {
  int client = 0;
  int64_t arrival_ns = 0;
  double latency_ms = 0;
  bool same_request(const RtLatency& o) const { return client == o.client && arrival_ns == o.arrival_ns; }
  bool operator<(const RtLatency& o) const { return std::tie(client, arrival_ns) < std::tie(o.client, o.arrival_ns); }
};

// By client and arrival, one per pair of them (a trace may repeat a time: the last record's
// latency counts). A sorted vector, not a map: a 1-hour run pairs millions of requests.
std::vector<RtLatency> rt_latencies_by_arrival(const Workload& w, const ModeRun& run) {
  std::vector<RtLatency> out;
  for (const RequestRecord& r : run.requests) {
    const ClientSpec& c = w.clients.at(static_cast<size_t>(r.client));
    if (!c.realtime || c.load == LoadType::kClosedLoop || r.dropped || r.failed) continue;
    out.push_back({r.client, std::llround(r.arrival_ms * 1e6), r.finish_ms - r.arrival_ms});
  }
  std::stable_sort(out.begin(), out.end());
  size_t kept = 0;
  for (const RtLatency& q : out) {
    if (kept > 0 && out[kept - 1].same_request(q)) {
      out[kept - 1] = q;
    } else {
      out[kept++] = q;
    }
  }
  out.resize(kept);
  return out;
}

}  // namespace

std::optional<QuantileChange> paired_rt_p99_change(const Workload& w, const ModeRun& mode, const ModeRun& rt_only) {
  std::vector<double> a, b;
  size_t most = 0;
  {
    const std::vector<RtLatency> base = rt_latencies_by_arrival(w, rt_only), other = rt_latencies_by_arrival(w, mode);
    most = std::max(base.size(), other.size());
    auto it = base.begin();
    for (const RtLatency& q : other) {
      it = std::lower_bound(it, base.end(), q);
      if (it != base.end() && it->same_request(q)) {
        a.push_back(q.latency_ms);
        b.push_back(it->latency_ms);
      }
    }
  }  // the keyed copies go before the bootstrap makes its own
  const auto paired = static_cast<double>(a.size());
  if (a.empty() || paired < kMinPairedShare * static_cast<double>(most)) return std::nullopt;
  return paired_quantile_change(a, b, 0.99);
}

void pair_with_rt_only(BenchResults& r) {
  const auto base = std::find_if(r.runs.begin(), r.runs.end(), [](const ModeRun& m) { return m.mode == "rt-only"; });
  if (base == r.runs.end()) return;
  for (size_t i = 0; i < r.runs.size() && i < r.stats.size(); ++i) {
    if (r.runs[i].mode != "rt-only") r.stats[i].rt_p99_paired = paired_rt_p99_change(r.workload, r.runs[i], *base);
  }
}

void ClientTally::add(const RequestRecord& r, const ClientSpec& spec, double duration_ms) {
  ++requests;
  preemptions += r.preemptions;
  if (r.dropped || r.failed) {
    ++(r.dropped ? dropped : failed);
    ++missed;
    return;
  }
  ++served;
  const double l = r.finish_ms - r.arrival_ms;
  latency_ms.add(l);
  if (r.finish_ms <= duration_ms) ++in_window;
  longest_wait_ms = std::max(longest_wait_ms, r.start_ms - r.arrival_ms);
  if (spec.deadline_ms && l > *spec.deadline_ms) ++missed;
}

namespace {

ClientStats client_stats(const ClientSpec& spec, const ClientTally& t, double seconds, double standalone_p50_ms) {
  ClientStats cs;
  cs.name = spec.name;
  cs.realtime = spec.realtime;
  cs.served = t.served;
  cs.dropped = t.dropped;
  cs.failed = t.failed;
  cs.latency_ms = t.latency_ms.distribution();
  cs.latency_exact = t.latency_ms.exact();
  cs.throughput_per_s = static_cast<double>(t.in_window) / seconds;
  cs.deadline_miss_rate =
      spec.deadline_ms && t.requests ? static_cast<double>(t.missed) / static_cast<double>(t.requests) : 0.0;
  cs.longest_wait_ms = t.longest_wait_ms;
  cs.preemptions = t.preemptions;
  if (standalone_p50_ms > 0) {
    cs.standalone_p50_ms = standalone_p50_ms;
    cs.p50_increase = cs.latency_ms.p50 / cs.standalone_p50_ms - 1.0;
  }
  return cs;
}

}  // namespace

ModeStats summarize(const Workload& w, const ModeRun& run, const std::vector<double>& standalone_p50_ms) {
  ModeStats m;
  m.mode = run.mode;
  const double seconds = run.duration_ms / 1000.0;
  ATOLL_CHECK(seconds > 0, kInvalidArgument, "mode '{}' ran for no time", run.mode);
  // Records fold into each client's tally (whole: they are in memory already), after what the
  // run folded as it went.
  std::vector<ClientTally> tallies;
  for (size_t c = 0; c < w.clients.size(); ++c) {
    tallies.push_back(c < run.tallies.size() ? run.tallies[c] : ClientTally(sched::LatencySketch::kUnbounded));
  }
  std::vector<double> rt_latencies, rt_waits_us, rt_runs_ms;
  for (const RequestRecord& r : run.requests) {
    const ClientSpec& spec = w.clients.at(static_cast<size_t>(r.client));
    tallies[static_cast<size_t>(r.client)].add(r, spec, run.duration_ms);
    if (!spec.realtime || r.dropped || r.failed) continue;
    rt_latencies.push_back(r.finish_ms - r.arrival_ms);
    rt_waits_us.push_back(1e3 * (r.start_ms - r.arrival_ms));
    rt_runs_ms.push_back(r.finish_ms - r.start_ms);
  }
  int64_t rt_total = 0, rt_missed = 0;
  for (size_t c = 0; c < w.clients.size(); ++c) {
    const ClientSpec& spec = w.clients[c];
    const ClientTally& t = tallies[c];
    m.requests += t.requests;
    ClientStats cs = client_stats(spec, t, seconds, c < standalone_p50_ms.size() ? standalone_p50_ms[c] : 0.0);
    if (spec.realtime) {
      rt_total += t.requests;
      rt_missed += t.missed;
      m.rt_throughput += cs.throughput_per_s;
    } else {
      m.be_throughput += cs.throughput_per_s;
      m.longest_be_wait_ms = std::max(m.longest_be_wait_ms, cs.longest_wait_ms);
      m.preemptions += cs.preemptions;
    }
    m.clients.push_back(std::move(cs));
  }
  m.rt_latency_ms = distribution(std::move(rt_latencies));
  m.rt_wait_us = distribution(std::move(rt_waits_us));
  m.rt_run_ms = distribution(std::move(rt_runs_ms));
  m.overall_throughput = m.rt_throughput + m.be_throughput;
  m.rt_deadline_miss_rate = rt_total ? static_cast<double>(rt_missed) / static_cast<double>(rt_total) : 0.0;
  m.preemption_latency_us = distribution(run.preemption_latency_us);
  m.preemption_staging_us = distribution(run.preemption_staging_us);
  m.preemption_reaction_us = distribution(run.preemption_reaction_us);
  std::vector<double> by_sentinel, by_scheduler;
  for (size_t k = 0; k < run.preemption_reaction_us.size(); ++k) {
    const bool sentinel = k < run.preemption_by_sentinel.size() && run.preemption_by_sentinel[k] != 0;
    (sentinel ? by_sentinel : by_scheduler).push_back(run.preemption_reaction_us[k]);
  }
  m.preemption_reaction_sentinel_us = distribution(std::move(by_sentinel));
  m.preemption_reaction_scheduler_us = distribution(std::move(by_scheduler));
  m.sentinel_wake_us = distribution(run.sentinel_wake_us);
  m.sentinel_claim_us = distribution(run.sentinel_claim_us);
  m.sentinel_open_us = distribution(run.sentinel_open_us);
  m.preemption_entry_us = distribution(run.preemption_entry_us);
  m.preemption_release_us = distribution(run.preemption_release_us);
  if (run.gate_stamps) {
    m.gate_passed_us = distribution(run.gate_stamps->passed_us);
    m.gate_flag_us = distribution(run.gate_stamps->flag_us);
  }
  const auto share = [](double part, double whole) { return whole > 0 ? part / whole : 0.0; };
  m.staging_share_p50 = share(m.preemption_staging_us.p50, m.preemption_latency_us.p50);
  m.staging_share_p99 = share(m.preemption_staging_us.p99, m.preemption_latency_us.p99);
  return m;
}

namespace {
nlohmann::json call_stats_json(const std::vector<DeviceCallStats>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const DeviceCallStats& c : calls) {
    out.push_back({{"call", c.call},
                   {"count", c.count},
                   {"over_100us", c.over_100us},
                   {"mean_us", c.count ? static_cast<double>(c.total_ns) / c.count / 1e3 : 0.0},
                   {"longest_us", static_cast<double>(c.longest_ns) / 1e3}});
  }
  return out;
}

// The preemptions' figures: latency, its staging and reaction, the sentinel's steps, gate stamps.
void add_preemption_json(const ModeStats& m, const ModeRun& run, nlohmann::json& mj) {
  mj["preemptions"] = m.preemptions;
  mj["preemption_latency_us"] = distribution_json(m.preemption_latency_us);
  mj["preemption_staging_us"] = distribution_json(m.preemption_staging_us);
  mj["staging_share"] = {{"p50", m.staging_share_p50}, {"p99", m.staging_share_p99}};
  mj["preemption_reaction_us"] = distribution_json(m.preemption_reaction_us);
  mj["preemption_reaction_by"] = {{"sentinel", distribution_json(m.preemption_reaction_sentinel_us)},
                                  {"scheduler", distribution_json(m.preemption_reaction_scheduler_us)}};
  mj["sentinel_steps_us"] = {{"wake", distribution_json(m.sentinel_wake_us)},
                             {"claim", distribution_json(m.sentinel_claim_us)},
                             {"open", distribution_json(m.sentinel_open_us)}};
  mj["preemption_entry_us"] = distribution_json(m.preemption_entry_us);
  mj["preemption_release_us"] = distribution_json(m.preemption_release_us);
  if (run.gate_stamps) {
    mj["gate_stamps_us"] = {{"passed", distribution_json(m.gate_passed_us)}, {"flag", distribution_json(m.gate_flag_us)}};
  } else {
    mj["gate_stamps_us"] = nullptr;
  }
}

// What the run recorded about the host and the device: polls, calls, clocks, load, stalls.
void add_host_json(const ModeRun& run, nlohmann::json& mj) {
  const sched::PollStats& polls = run.polls;
  mj["scheduler_polls"] = {{"count", polls.count},
                           {"over_50us", polls.over_50us},
                           {"longest_us", static_cast<double>(polls.longest_ns) / 1e3},
                           {"longest_phase", sched::poll_phase_name(polls.longest_phase)}};
  mj["first_failure"] = run.first_failure;
  mj["device_calls"] = call_stats_json(run.device_calls);
  mj["launches_by_op"] = call_stats_json(run.launches_by_op);
  mj["rt_armed"] = run.rt_armed;
  mj["l2_persisting_bytes"] = run.l2_persisting_bytes;
  mj["sentinel_rt_tasks"] = run.sentinel_rt_tasks;
  mj["inputs_staged_clients"] = run.staged_clients;
  if (const auto& c = run.gpu_clock) {
    mj["gpu_clock"] = {{"samples", c->samples},         {"sm_mhz_mean", c->sm_mhz_mean},
                       {"sm_mhz_min", c->sm_mhz_min},   {"sm_mhz_max", c->sm_mhz_max},
                       {"power_w_mean", c->power_w_mean}};
  } else {
    mj["gpu_clock"] = nullptr;
  }
  if (const auto& load = run.host_load) {
    mj["host_cpu_busy"] = {{"all", load->busy},
                           {"others", load->busy_others},
                           {"steal", load->steal},
                           {"steal_max_core", load->steal_max_core},
                           {"involuntary_switches", load->involuntary_switches}};
  } else {
    mj["host_cpu_busy"] = nullptr;
  }
  if (const auto& s = run.host_stalls) {
    mj["host_stalls"] = {{"wakes", s->wakes},
                         {"over_threshold", s->over_threshold},
                         {"threshold_us", s->threshold_us},
                         {"longest_us", s->longest_us}};
  } else {
    mj["host_stalls"] = nullptr;
  }
}

nlohmann::json client_json(const ClientStats& c) {
  return {{"name", c.name},
          {"priority", c.realtime ? "rt" : "be"},
          {"served", c.served},
          {"dropped", c.dropped},
          {"failed", c.failed},
          {"latency_ms", distribution_json(c.latency_ms)},
          {"latency_exact", c.latency_exact},
          {"standalone_p50_ms", c.standalone_p50_ms},
          {"p50_increase", c.p50_increase},
          {"deadline_miss_rate", c.deadline_miss_rate},
          {"throughput_per_s", c.throughput_per_s},
          {"longest_wait_ms", c.longest_wait_ms},
          {"preemptions", c.preemptions}};
}

// One mode's results: `m` its statistics, `run` what the run recorded, `rt_only` the baseline's
// statistics when the run had one.
nlohmann::json mode_json(const ModeStats& m, const ModeRun& run, const ModeStats* rt_only) {
  nlohmann::json mj;
  mj["mode"] = m.mode;
  mj["duration_s"] = run.duration_ms / 1000.0;
  mj["requests"] = m.requests;
  mj["rt_latency_ms"] = distribution_json(m.rt_latency_ms);
  mj["rt_wait_us"] = distribution_json(m.rt_wait_us);
  mj["rt_run_ms"] = distribution_json(m.rt_run_ms);
  if (rt_only != nullptr && m.rt_latency_ms.count > 0) {
    const P99Change c = p99_change(m.rt_latency_ms, rt_only->rt_latency_ms);
    mj["rt_p99_vs_rt_only"] = {{"change", c.change}, {"ci", {c.low, c.high}}, {"paired", nullptr}};
    if (const auto& p = m.rt_p99_paired) {
      mj["rt_p99_vs_rt_only"]["paired"] = {{"change", p->change}, {"ci", {p->low, p->high}}, {"pairs", p->pairs}};
    }
  }
  mj["throughput_per_s"] = {{"rt", m.rt_throughput}, {"be", m.be_throughput}, {"overall", m.overall_throughput}};
  mj["rt_deadline_miss_rate"] = m.rt_deadline_miss_rate;
  mj["longest_be_wait_ms"] = m.longest_be_wait_ms;
  add_preemption_json(m, run, mj);
  add_host_json(run, mj);
  for (const ClientStats& c : m.clients) mj["clients"].push_back(client_json(c));
  return mj;
}

}  // namespace

nlohmann::json results_json(const BenchResults& r) {
  nlohmann::json j;
  j["schema"] = "atoll.disb/1";
  j["workload"] = {{"name", r.workload.name}, {"description", r.workload.description}};
  for (const auto& c : r.workload.clients) {
    nlohmann::json cj{{"name", c.name},
                      {"model", c.model},
                      {"batch", c.batch},
                      {"seq", c.seq_len},
                      {"priority", c.realtime ? "rt" : "be"},
                      {"load", load_type_name(c.load)}};
    if (c.rate_hz > 0) cj["rate_hz"] = c.rate_hz;
    if (c.load == LoadType::kClosedLoop) cj["concurrency"] = c.concurrency;
    if (c.deadline_ms) cj["deadline_ms"] = *c.deadline_ms;
    j["workload"]["clients"].push_back(cj);
  }
  j["device"] = r.device;
  j["commit"] = r.commit;
  j["settings"] = {{"seed", r.seed},
                   {"grace_s", r.grace_s},
                   {"standalone_s", r.standalone_s},
                   {"warmup_s", r.warmup_s},
                   {"inflight_cap", r.inflight_cap},
                   {"be_queue_us", r.be_queue_us},
                   {"padding_rt_budget", r.padding_rt_budget},
                   {"rt_l2", r.rt_l2},
                   {"rt_l2_budget_bytes", r.rt_l2_budget_bytes},
                   {"armed_rt", r.rt_path.armed_rt},
                   {"arrival_sentinel", r.rt_path.arrival_sentinel},
                   {"sentinel_fifo_priority", r.rt_path.sentinel.fifo_priority},
                   {"sentinel_words", r.rt_path.sentinel.spin_words ? "spin" : "claim"},
                   {"staged_inputs", r.rt_path.staged_inputs},
                   {"rt_copies", r.rt_path.rt_sm_copies ? "sms" : "copy-engine"},
                   {"be_uploads", sched::be_uploads_name(r.rt_path.be_uploads)},
                   {"rt_launch", r.rt_path.rt_single_launch ? "one" : "per-kernel"},
                   {"rt_arm_next", r.rt_path.arm_behind_running ? "behind" : "after"},
                   {"rt_order", r.rt_order},
                   // The CUDA engine's switches (read by the backend at load): A/B runs differ only there.
                   {"engine_switches", env_with_prefix("ATOLL_CUDA_")}};
  const ModeStats* rt_only = find_rt_only(r.stats);
  for (size_t i = 0; i < r.stats.size(); ++i) j["modes"].push_back(mode_json(r.stats[i], r.runs[i], rt_only));
  return j;
}

std::string results_csv(const BenchResults& r) {
  std::string out =
      "workload,mode,client,priority,served,dropped,failed,mean_ms,p50_ms,p90_ms,p99_ms,p99_9_ms,max_ms,"
      "standalone_p50_ms,p50_increase,deadline_miss_rate,throughput_per_s,longest_wait_ms,preemptions,"
      "rt_order,mode_preemption_p50_us,mode_preemption_p99_us,mode_staging_p50_us,mode_staging_p99_us,"
      "mode_staging_share_p50,mode_staging_share_p99\n";
  for (const ModeStats& m : r.stats) {
    const Distribution& pre = m.preemption_latency_us;
    const Distribution& staging = m.preemption_staging_us;
    const std::string mode_columns =
        fmt::format("{},{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{:.4f}", r.rt_order, pre.p50, pre.p99, staging.p50,
                    staging.p99, m.staging_share_p50, m.staging_share_p99);
    for (const ClientStats& c : m.clients) {
      const Distribution& d = c.latency_ms;
      out += fmt::format(
          "{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.3f},{:.4f},{},{}\n",
          csv_field(r.workload.name), m.mode, csv_field(c.name), c.realtime ? "rt" : "be", c.served, c.dropped,
          c.failed, d.mean, d.p50, d.p90, d.p99, d.p999, d.max, c.standalone_p50_ms, c.p50_increase,
          c.deadline_miss_rate, c.throughput_per_s, c.longest_wait_ms, c.preemptions, mode_columns);
    }
  }
  return out;
}

std::string perfetto_trace_json(const ModeRun& run) {
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int> tids;
  auto tid = [&](const std::string& track) {
    auto [it, fresh] = tids.emplace(track, static_cast<int>(tids.size()) + 1);
    if (fresh) {
      events.push_back(
          {{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", it->second}, {"args", {{"name", track}}}});
    }
    return it->second;
  };
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "atoll " + run.mode}}}});
  for (const KernelSpan& k : run.timeline) {
    events.push_back({{"ph", "X"},
                      {"name", k.name},
                      {"cat", k.realtime ? "rt" : "be"},
                      {"pid", 1},
                      {"tid", tid(k.track)},
                      {"ts", k.start_ms * 1000.0},
                      {"dur", std::max(0.0, (k.end_ms - k.start_ms) * 1000.0)},
                      {"args", {{"preempted", k.preempted}}}});
  }
  for (const InstantEvent& e : run.events) {
    events.push_back(
        {{"ph", "i"}, {"s", "g"}, {"name", e.name}, {"pid", 1}, {"tid", tid(e.track)}, {"ts", e.at_ms * 1000.0}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace atl::bench
