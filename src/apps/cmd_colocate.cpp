#include <fmt/core.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/commands.h"
#include "apps/options.h"
#include "core/error.h"
#include "models/zoo.h"
#include "profile/kernel_profile.h"
#include "runtime/model_source.h"
#include "sched/colocate.h"

namespace atl::apps {

namespace {

struct ColocateFlags {
  std::vector<std::string> rt;  // MODEL[@BATCH][:HZ], repeatable or comma-separated
  std::vector<std::string> be;  // MODEL[@BATCH]
  std::string mode = "reset";
  std::string rt_order = "fifo";
  double duration_s = 1.0;
  std::string device = "sim";
  int64_t batch = 1;
  uint64_t seed = 0;
  int cap = 4;
  double be_queue_us = 0;
  double padding_rt_budget = 0;  // a fraction (--padding-rt-budget)
  RtL2Flags rt_l2;
  double warmup_s = sched::ColocateOptions{}.warmup_s;
  RtPathFlags rt_path;
  std::vector<std::string> profiles;  // kernel profile files
  bool json = false;
};

struct ClientArg {
  std::string model;
  std::optional<int64_t> batch;
  std::optional<double> hz;
};

// MODEL[@BATCH] for BE clients, MODEL[@BATCH][:HZ] for RT clients (`flag` names which).
ClientArg parse_client(const std::string& spec, const std::string& flag, bool takes_rate) {
  const std::string syntax = takes_rate ? "MODEL[@BATCH][:HZ]" : "MODEL[@BATCH]";
  // An empty list such as "--be ," makes CLI11 take the next argument, often a flag, as the value.
  ATOLL_CHECK(!spec.empty() && spec[0] != '-', kInvalidArgument, "{}: expected {}, got '{}' (an empty model list?)",
              flag, syntax, spec);
  ClientArg c;
  std::string rest = spec;
  if (const auto colon = rest.rfind(':'); takes_rate && colon != std::string::npos) {
    c.hz = parse_number<double>(rest.substr(colon + 1));
    ATOLL_CHECK(c.hz && *c.hz <= 1e6, kInvalidArgument,
                "{} '{}': the rate after ':' must be a number of Hz in (0, 1e6]", flag, spec);
    rest.resize(colon);
  }
  if (const auto at = rest.find('@'); at != std::string::npos) {
    c.batch = parse_number<int64_t>(rest.substr(at + 1));
    ATOLL_CHECK(c.batch && *c.batch <= 4096, kInvalidArgument,
                "{} '{}': the batch after '@' must be an integer in [1, 4096]", flag, spec);
    rest.resize(at);
  }
  ATOLL_CHECK(!rest.empty() && rest.find_first_of(":@") == std::string::npos, kInvalidArgument, "{} '{}': expected {}",
              flag, spec, syntax);
  try {
    check_model_exists(rest);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} '{}': {}", flag, spec, e.message()), e.file(), e.line());
  }
  c.model = rest;
  return c;
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
    j["rt_arrival"] = !r.armed_rt ? "launch" : r.sentinel_rt_tasks > 0 ? "sentinel" : "armed";
    j["sentinel_rt_tasks"] = r.sentinel_rt_tasks;
    j["rt_order"] = sched::rt_order_name(r.rt_order);
    j["batch"] = f.batch;
    j["inflight_cap"] = f.cap;
    j["be_queue_us"] = f.be_queue_us;
    j["padding_rt_budget_pct"] = f.padding_rt_budget * 100;
    j["padding_guarded"] = r.padding_guarded;
    j["rt_l2"] = f.rt_l2.buffer;
    j["l2_persisting_bytes"] = r.l2_persisting_bytes;
    j["rt_latency_ms"] = stats_json(r.rt_latency_ms);
    j["rt_breakdown"] = {{"staging_us", stats_json(r.rt_staging_us)},
                         {"queueing_us", stats_json(r.rt_queueing_us)},
                         {"service_ms", stats_json(r.rt_service_ms)}};
    j["be_throughput_per_s"] = r.be_throughput_per_s;
    j["preemptions"] = {{"count", r.preemptions},
                        {"latency_us", stats_json(r.preemption_latency_us)},
                        {"staging_us", stats_json(r.preemption_staging_us)},
                        {"staging_share", {{"p50", r.staging_share_p50}, {"p99", r.staging_share_p99}}},
                        {"relaunched_kernels", r.relaunched_kernels}};
    j["padded_kernels"] = r.padded_kernels;
    j["padded_slices"] = r.padded_slices;
    j["padded_capped"] = r.padded_capped;
    for (const auto& c : r.clients) {
      nlohmann::json cj{{"model", c.name},
                        {"class", sched::task_class_name(c.task_class)},
                        {"batch", c.batch},
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
  fmt::print("colocate  mode {} on {}, {:.3f} s, RT order {}, in-flight cap {}\n", sched::mode_name(r.mode), r.device,
             r.duration_s, sched::rt_order_name(r.rt_order), f.cap);
  if (f.rt_l2.buffer != "off") {
    fmt::print("RT clients' {} persisting in L2: {:.1f} MiB set aside\n", f.rt_l2.buffer,
               static_cast<double>(r.l2_persisting_bytes) / (1024.0 * 1024.0));
  }
  for (const auto& c : r.clients) {
    const std::string name = fmt::format("{}@{}", c.name, c.batch);
    if (c.task_class == sched::TaskClass::kRealTime) {
      fmt::print("RT  {:<18} {:>7.1f} Hz  {:>6} done  latency from arrival p50 {:.3f}  p99 {:.3f}  max {:.3f} ms\n",
                 name, c.hz, c.completed, c.latency_ms.median_ms, c.latency_ms.p99_ms, c.latency_ms.max_ms);
    } else {
      fmt::print("BE  {:<18} {:>10}  {:>6} done  {:.1f} /s  preempted {} times\n", name, "closed", c.completed,
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
  fmt::print("  of which staging (arrival -> dispatch) p50 {:.1f} us ({:.0f}%)  p99 {:.1f} us ({:.0f}%)\n",
             r.preemption_staging_us.median_ms, 100 * r.staging_share_p50, r.preemption_staging_us.p99_ms,
             100 * r.staging_share_p99);
  if (sched::mode_traits(r.mode).pads_be) {
    fmt::print("padding      {} BE kernels whole, {} on capped grids and {} slices of BE kernels ran beside RT tasks\n",
               r.padded_kernels, r.padded_capped, r.padded_slices);
    if (r.padding_guarded > 0) fmt::print("             {} RT tasks ran with nothing padded beside them (--padding-rt-budget)\n", r.padding_guarded);
  }
}

void run_colocate_command(const ColocateFlags& f) {
  sched::ColocateOptions o;
  // --be first: a list ending in ',' makes CLI11 take the next arguments (such as "--rt X") as its
  // values, and its error names the real mistake where a missing --rt would not.
  for (const std::string& spec : f.be) {
    const ClientArg c = parse_client(spec, "--be", false);
    o.be.push_back({c.model, c.batch});
  }
  ATOLL_CHECK(!f.rt.empty(), kInvalidArgument, "--rt is required: at least one RT model, MODEL[@BATCH][:HZ]");
  for (const std::string& spec : f.rt) {
    const ClientArg c = parse_client(spec, "--rt", true);
    o.rt.push_back({c.model, c.hz.value_or(sched::ColocateOptions::Rt{}.hz), c.batch});
  }
  o.mode = sched::mode_from_name(f.mode);
  o.rt_order = sched::rt_order_from_name(f.rt_order);
  o.duration_s = f.duration_s;
  o.device = f.device;
  o.batch = f.batch;
  o.seed = f.seed;
  o.inflight_cap = f.cap;
  o.be_queue_ns = std::llround(f.be_queue_us * 1e3);
  o.padding_rt_budget = f.padding_rt_budget;
  o.rt_l2 = rt_l2_buffer(f.rt_l2, f.device);
  o.rt_l2_budget_bytes = rt_l2_budget_bytes(f.rt_l2);
  o.warmup_s = f.warmup_s;
  o.rt_path = rt_path_options(f.rt_path);
  for (const std::string& path : f.profiles) o.profiles.push_back(load_profile(path));
  ATOLL_CHECK(o.mode == sched::Mode::kRtOnly || !o.be.empty(), kInvalidArgument,
              "mode {} needs at least one --be model", f.mode);
  print_report(sched::run_colocate(o), f);
}

}  // namespace

void add_colocate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("colocate", "Run RT and BE models together under one scheduling mode");
  auto f = std::make_shared<ColocateFlags>();
  cmd->add_option("--rt", f->rt,
                  "RT models with batch and rate, MODEL[@BATCH][:HZ] (default --batch, 100 Hz); repeatable, required")
      ->delimiter(',');
  cmd->add_option("--be", f->be, "BE models, closed loop: MODEL[@BATCH][,MODEL[@BATCH]...]")->delimiter(',');
  std::vector<std::string> modes;
  for (const sched::Mode m : sched::all_modes()) modes.push_back(sched::mode_name(m));
  cmd->add_option("--mode", f->mode, fmt::format("Scheduling mode: {}", fmt::join(modes, ", ")))
      ->check(CLI::IsMember(modes));
  cmd->add_option("--rt-order", f->rt_order,
                  "Which waiting RT request runs next: fifo (first arrived) or edf (earliest deadline; a request's "
                  "deadline is its arrival plus its client's period)")
      ->check(CLI::IsMember({"fifo", "edf"}));
  cmd->add_option("--duration", f->duration_s, "Seconds of arrivals (simulated time on sim)")
      ->check(CLI::Range(1e-6, 3600.0));
  cmd->add_option("--device", f->device, "sim or cuda")->check(CLI::IsMember({"sim", "cuda"}));
  cmd->add_option("--batch", f->batch, "Batch size of every client without @BATCH")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--cap", f->cap, "Kernels a BE stream may have on the device at once")->check(CLI::Range(1, 1 << 20));
  add_be_queue_flag(cmd, f->be_queue_us);
  add_padding_budget_flag(cmd, f->padding_rt_budget);
  add_rt_l2_flags(cmd, f->rt_l2);
  cmd->add_option("--seed", f->seed, "Seed for inputs (and weights where the device computes)")->check(kWholeUint64);
  cmd->add_option("--warmup", f->warmup_s, "Seconds of every client in seq mode, unmeasured, first (real devices only)")
      ->check(CLI::Range(0.0, 600.0));
  add_rt_path_flags(cmd, f->rt_path);
  cmd->add_option("--profile", f->profiles,
                  "Kernel profiles from `atoll profile` (repeatable): the padding modes plan with them, and the "
                  "simulator runs their measured times; padding modes profile models without one on the device")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([f] { run_colocate_command(*f); });
}

}  // namespace atl::apps
