#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "core/error.h"
#include "sched/colocate.h"

namespace atl::apps {

namespace {

struct ColocateFlags {
  std::vector<std::string> rt;  // MODEL[:HZ], repeatable or comma-separated
  std::vector<std::string> be;
  std::string mode = "reset";
  double duration_s = 1.0;
  std::string device = "sim";
  int64_t batch = 1;
  uint64_t seed = 0;
  int cap = 4;
  double warmup_s = sched::ColocateOptions{}.warmup_s;
  std::string rt_arrival = "armed";
  bool json = false;
};

sched::ColocateOptions::Rt parse_rt(const std::string& spec) {
  const auto colon = spec.rfind(':');
  sched::ColocateOptions::Rt rt;
  rt.model = spec.substr(0, colon);
  ATOLL_CHECK(!rt.model.empty(), kInvalidArgument, "--rt '{}': expected MODEL[:HZ]", spec);
  if (colon == std::string::npos) return rt;
  const std::string hz = spec.substr(colon + 1);
  size_t used = 0;
  try {
    rt.hz = std::stod(hz, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ATOLL_CHECK(used == hz.size() && used > 0 && rt.hz > 0 && rt.hz <= 1e6, kInvalidArgument,
              "--rt '{}': the rate after ':' must be a number of Hz in (0, 1e6]", spec);
  return rt;
}

nlohmann::json stats_json(const LatencyStats& s) {
  return {{"samples", s.samples}, {"p50", s.median_ms}, {"p99", s.p99_ms}, {"max", s.max_ms}, {"mean", s.mean_ms}};
}

void print_report(const sched::WorkloadReport& r, const ColocateFlags& f) {
  if (f.json) {
    nlohmann::json j;
    j["mode"] = sched::mode_name(r.mode);
    j["device"] = r.device;
    j["duration_s"] = r.duration_s;
    j["warmup_s"] = r.warmup_s;
    j["rt_arrival"] = r.armed_rt ? "armed" : "launch";
    j["batch"] = f.batch;
    j["inflight_cap"] = f.cap;
    j["rt_latency_ms"] = stats_json(r.rt_latency_ms);
    j["rt_breakdown"] = {{"staging_us", stats_json(r.rt_staging_us)},
                         {"queueing_us", stats_json(r.rt_queueing_us)},
                         {"service_ms", stats_json(r.rt_service_ms)}};
    j["be_throughput_per_s"] = r.be_throughput_per_s;
    j["preemptions"] = {{"count", r.preemptions},
                        {"latency_us", stats_json(r.preemption_latency_us)},
                        {"relaunched_kernels", r.relaunched_kernels}};
    for (const auto& c : r.clients) {
      nlohmann::json cj{{"model", c.name},
                        {"class", sched::task_class_name(c.task_class)},
                        {"completed", c.completed},
                        {"throughput_per_s", c.throughput_per_s},
                        {"latency_ms", stats_json(c.latency_ms)},
                        {"preemptions", c.preemptions}};
      if (c.task_class == sched::TaskClass::kRealTime) cj["hz"] = c.hz;
      j["clients"].push_back(cj);
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("colocate  mode {} on {}, {:.3f} s, batch {}, in-flight cap {}\n", sched::mode_name(r.mode), r.device,
             r.duration_s, f.batch, f.cap);
  for (const auto& c : r.clients) {
    if (c.task_class == sched::TaskClass::kRealTime) {
      fmt::print("RT  {:<14} {:>7.1f} Hz  {:>6} done  latency from arrival p50 {:.3f}  p99 {:.3f}  max {:.3f} ms\n",
                 c.name, c.hz, c.completed, c.latency_ms.median_ms, c.latency_ms.p99_ms, c.latency_ms.max_ms);
    } else {
      fmt::print("BE  {:<14} {:>10}  {:>6} done  {:.1f} /s  preempted {} times\n", c.name, "closed", c.completed,
                 c.throughput_per_s, c.preemptions);
    }
  }
  fmt::print("RT latency   p50 {:.3f} ms  p99 {:.3f} ms  max {:.3f} ms  ({} requests)\n", r.rt_latency_ms.median_ms,
             r.rt_latency_ms.p99_ms, r.rt_latency_ms.max_ms, r.rt_latency_ms.samples);
  fmt::print("RT breakdown p50: arrival -> dispatch {:.1f} us, dispatch -> first kernel {:.1f} us, service {:.3f} ms\n",
             r.rt_staging_us.median_ms, r.rt_queueing_us.median_ms, r.rt_service_ms.median_ms);
  fmt::print("BE throughput {:.1f} requests/s\n", r.be_throughput_per_s);
  fmt::print("preemptions  {} BE tasks, {} kernels re-run; RT arrival -> first kernel p50 {:.1f} us  p99 {:.1f} us\n",
             r.preemptions, r.relaunched_kernels, r.preemption_latency_us.median_ms, r.preemption_latency_us.p99_ms);
}

void run_colocate_command(const ColocateFlags& f) {
  sched::ColocateOptions o;
  for (const std::string& spec : f.rt) o.rt.push_back(parse_rt(spec));
  o.be = f.be;
  o.mode = sched::mode_from_name(f.mode);
  o.duration_s = f.duration_s;
  o.device = f.device;
  o.batch = f.batch;
  o.seed = f.seed;
  o.inflight_cap = f.cap;
  o.warmup_s = f.warmup_s;
  o.armed_rt = f.rt_arrival == "armed";
  ATOLL_CHECK(o.mode == sched::Mode::kRtOnly || !o.be.empty(), kInvalidArgument,
              "mode {} needs at least one --be model", f.mode);
  print_report(sched::run_colocate(o), f);
}

}  // namespace

void add_colocate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("colocate", "Run RT and BE models together under one scheduling mode");
  auto f = std::make_shared<ColocateFlags>();
  cmd->add_option("--rt", f->rt, "RT model and rate, MODEL[:HZ] (default 100 Hz); repeatable")
      ->required()
      ->delimiter(',');
  cmd->add_option("--be", f->be, "BE models, closed loop: MODEL[,MODEL...]")->delimiter(',');
  cmd->add_option("--mode", f->mode, "rt-only, seq, streams, streams-prio, wait or reset")
      ->check(CLI::IsMember({"rt-only", "seq", "streams", "streams-prio", "wait", "reset"}));
  cmd->add_option("--duration", f->duration_s, "Seconds of arrivals (simulated time on sim)")
      ->check(CLI::Range(1e-6, 3600.0));
  cmd->add_option("--device", f->device, "sim or cuda")->check(CLI::IsMember({"sim", "cuda"}));
  cmd->add_option("--batch", f->batch, "Batch size of every model")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--cap", f->cap, "Kernels a BE stream may have on the device at once")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", f->seed, "Seed for inputs (and weights where the device computes)");
  cmd->add_option("--warmup", f->warmup_s, "Seconds of every client in seq mode, unmeasured, first (real devices only)")
      ->check(CLI::Range(0.0, 600.0));
  cmd->add_option("--rt-arrival", f->rt_arrival,
                  "reset mode: armed (each RT client's next task waits on the device, released by host stores) or "
                  "launch (the flag write and the RT kernels are enqueued on arrival)")
      ->check(CLI::IsMember({"armed", "launch"}));
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([f] { run_colocate_command(*f); });
}

}  // namespace atl::apps
