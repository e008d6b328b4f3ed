#include <fmt/core.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "apps/commands.h"
#include "apps/options.h"
#include "bench/pairs.h"
#include "bench/runner.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text.h"
#include "profile/kernel_profile.h"

namespace atl::apps {

namespace {

struct DisbFlags {
  std::string workload;
  std::vector<std::string> modes;  // empty: every mode
  double duration_s = 30;
  std::string device = "sim";
  std::string out = "disb-out";
  uint64_t seed = 0;
  double timeline_ms = 200;
  double warmup_s = bench::DisbOptions{}.warmup_s;
  int cap = bench::DisbOptions{}.inflight_cap;
  double be_queue_us = 0;
  double padding_rt_budget = 0;  // a fraction (--padding-rt-budget)
  RtL2Flags rt_l2;
  RtPathFlags rt_path;
  std::string rt_order = "fifo";
  std::vector<std::string> profiles;  // kernel profile files
};

// Where shipped workloads are looked for: $ATOLL_WORKLOADS_DIR, the working directory's
// bench/workloads (a checkout's root), then the source tree atoll was built from.
std::vector<std::string> workload_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("ATOLL_WORKLOADS_DIR"); env != nullptr && *env != '\0') dirs.emplace_back(env);
  dirs.emplace_back("bench/workloads");
  dirs.emplace_back(ATOLL_SOURCE_DIR "/bench/workloads");
  return dirs;
}

// One status line on stderr: rewritten in place on a terminal, one line per phase otherwise
// (logs and CI should not fill with carriage returns).
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(STDERR_FILENO) == 1) {}
  ~ProgressLine() { clear(); }

  void update(const bench::DisbProgress& p) {
    const bool new_phase = p.phase != phase_ || p.workload != workload_;
    const auto now = std::chrono::steady_clock::now();
    if (!new_phase && (!tty_ || now - last_ < std::chrono::milliseconds(100))) return;
    phase_ = p.phase;
    workload_ = p.workload;
    last_ = now;
    std::string text = fmt::format("DISB {}: {}", p.workload, p.phase);
    if (p.mode_index > 0) text += fmt::format(" (mode {}/{})", p.mode_index, p.mode_count);
    if (p.seconds_left > 0) text += fmt::format(", {:.1f} s left", p.seconds_left);
    if (tty_) {
      fmt::print(stderr, "\r\033[K{}", text);
      shown_ = true;
    } else {
      fmt::print(stderr, "{}\n", text);
    }
    std::fflush(stderr);
  }

  void clear() {
    if (!shown_) return;
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool tty_;
  bool shown_ = false;
  std::string phase_, workload_;
  std::chrono::steady_clock::time_point last_{};
};

// One row per mode: latency, throughput, preemption, drops.
void print_mode_rows(const bench::BenchResults& r) {
  fmt::print("{:<13} {:>9} {:>9} {:>28} {:>9} {:>7} {:>8} {:>8} {:>9} {:>8} {:>11} {:>23} {:>11} {:>10} {:>8}\n",
             "mode", "RT p50 ms", "RT p99 ms", "p99 vs rt-only [95%]", "RT max ms", "miss %", "RT/s", "BE/s", "total/s",
             "preempt", "preempt p99", "staging p50/p99 (share)", "react p99", "BE wait ms", "dropped");
  for (const bench::ModeStats& m : r.stats) {
    int dropped = 0;
    for (const bench::ClientStats& c : m.clients) dropped += c.dropped;
    const std::string change = bench::p99_change_text(m, r.stats);
    const std::string staging =
        fmt::format("{:.1f}/{:.1f} us ({:.0f}/{:.0f}%)", m.preemption_staging_us.p50, m.preemption_staging_us.p99,
                    100.0 * m.staging_share_p50, 100.0 * m.staging_share_p99);
    fmt::print(
        "{:<13} {:>9.3f} {:>9.3f} {:>28} {:>9.3f} {:>7.2f} {:>8.1f} {:>8.1f} {:>9.1f} {:>8} {:>8.1f} us {:>23} "
        "{:>8.1f} us {:>10.2f} {:>8}\n",
        m.mode, m.rt_latency_ms.p50, m.rt_latency_ms.p99, change, m.rt_latency_ms.max, 100.0 * m.rt_deadline_miss_rate,
        m.rt_throughput, m.be_throughput, m.overall_throughput, m.preemptions, m.preemption_latency_us.p99, staging,
        m.preemption_reaction_us.p99, m.longest_be_wait_ms, dropped);
  }
}

// Where RT latency and each preemption's time went.
void print_latency_split(const bench::BenchResults& r) {
  for (const bench::ModeStats& m : r.stats) {
    if (m.rt_latency_ms.count == 0) continue;
    fmt::print("RT latency in {}, p50/p99: before the first kernel {:.1f}/{:.1f} us, on the device {:.3f}/{:.3f} ms\n",
               m.mode, m.rt_wait_us.p50, m.rt_wait_us.p99, m.rt_run_ms.p50, m.rt_run_ms.p99);
  }
  for (const bench::ModeStats& m : r.stats) {
    if (m.preemptions == 0) continue;
    fmt::print("staging in {}, p50/p99: reaction {:.1f}/{:.1f} us, entry {:.1f}/{:.1f} us, release {:.1f}/{:.1f} us\n",
               m.mode, m.preemption_reaction_us.p50, m.preemption_reaction_us.p99, m.preemption_entry_us.p50,
               m.preemption_entry_us.p99, m.preemption_release_us.p50, m.preemption_release_us.p99);
    if (m.preemption_reaction_sentinel_us.count > 0) {
      fmt::print("reaction in {}, p50/p99: by the arrival sentinel {:.1f}/{:.1f} us ({} requests), by the scheduler "
                 "{:.1f}/{:.1f} us ({})\n",
                 m.mode, m.preemption_reaction_sentinel_us.p50, m.preemption_reaction_sentinel_us.p99,
                 m.preemption_reaction_sentinel_us.count, m.preemption_reaction_scheduler_us.p50,
                 m.preemption_reaction_scheduler_us.p99, m.preemption_reaction_scheduler_us.count);
      fmt::print("  the sentinel's steps, p50/p99: reaching the arrival {:.1f}/{:.1f} us, the claim {:.1f}/{:.1f} us, "
                 "completion words and gate {:.1f}/{:.1f} us\n",
                 m.sentinel_wake_us.p50, m.sentinel_wake_us.p99, m.sentinel_claim_us.p50, m.sentinel_claim_us.p99,
                 m.sentinel_open_us.p50, m.sentinel_open_us.p99);
    }
    if (m.gate_passed_us.count > 0 || m.gate_flag_us.count > 0) {
      fmt::print("  from the gate's store (host clock), p50/p99: the stream past its hold {:.1f}/{:.1f} us ({}), the "
                 "flag written behind it {:.1f}/{:.1f} us ({})\n",
                 m.gate_passed_us.p50, m.gate_passed_us.p99, m.gate_passed_us.count, m.gate_flag_us.p50,
                 m.gate_flag_us.p99, m.gate_flag_us.count);
    }
  }
}

// The host's side of each run: scheduler steps, slow device calls, launches, clocks, stalls.
void print_host_diagnostics(const bench::BenchResults& r) {
  for (const bench::ModeRun& run : r.runs) {
    // Host time per step, where the device clock shows it.
    if (run.polls.longest_ns == 0) continue;
    fmt::print("scheduler steps in {}: {}, {} over 50 us, longest {:.1f} us (mostly {})\n", run.mode, run.polls.count,
               run.polls.over_50us, static_cast<double>(run.polls.longest_ns) / 1e3,
               sched::poll_phase_name(run.polls.longest_phase));
    // Where the host stalled: the slowest kinds of device call.
    std::vector<bench::DeviceCallStats> calls = run.device_calls;
    std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.longest_ns > b.longest_ns; });
    std::string slowest;
    for (size_t i = 0; i < std::min<size_t>(calls.size(), 3); ++i) {
      slowest += fmt::format("{}{} {:.1f} us ({} over 100 us)", i ? ", " : "", calls[i].call,
                             static_cast<double>(calls[i].longest_ns) / 1e3, calls[i].over_100us);
    }
    if (!slowest.empty()) fmt::print("  slowest device calls in {}: {}\n", run.mode, slowest);
    std::string by_op;
    for (size_t i = 0; i < std::min<size_t>(run.launches_by_op.size(), 4); ++i) {
      const bench::DeviceCallStats& c = run.launches_by_op[i];
      by_op += fmt::format("{}{} {} x {:.1f} us", i ? ", " : "", c.call, c.count,
                           static_cast<double>(c.total_ns) / static_cast<double>(c.count) / 1e3);
    }
    if (!by_op.empty()) fmt::print("  kernel launches in {} (host, by op): {}\n", run.mode, by_op);
    if (const auto& c = run.gpu_clock) {
      fmt::print("  GPU in {}: SM clock mean {:.0f} MHz (min {:.0f}, max {:.0f}), power mean {:.0f} W\n", run.mode,
                 c->sm_mhz_mean, c->sm_mhz_min, c->sm_mhz_max, c->power_w_mean);
    }
    if (const auto& s = run.host_stalls) {
      const bench::HostLoad load = run.host_load.value_or(bench::HostLoad{});
      fmt::print("  host in {}: {} stalls over {:.0f} us (longest {:.0f} us) in {} wakes, CPU steal {:.2f}% (most "
                 "stolen core {:.2f}%), {} involuntary context switches\n",
                 run.mode, s->over_threshold, s->threshold_us, s->longest_us, s->wakes, 100.0 * load.steal,
                 100.0 * load.steal_max_core, load.involuntary_switches);
    }
  }
}

void print_run_warnings(const bench::BenchResults& r) {
  for (size_t i = 0; i < r.runs.size(); ++i) {
    if (!r.runs[i].first_failure.empty()) {
      fmt::print(stderr, "warning: mode {}: requests failed, first: {}\n", r.runs[i].mode, r.runs[i].first_failure);
    }
    if (const auto& load = r.runs[i].host_load; load && load->busy_others > bench::kBusyOthersWarning) {
      fmt::print(stderr,
                 "warning: mode {}: other processes kept {:.0f}% of the host's CPU time busy; its latency may "
                 "include host starvation\n",
                 r.runs[i].mode, 100.0 * load->busy_others);
    }
    if (const auto& s = r.runs[i].host_stalls; s && s->longest_us > bench::kStallWarningUs) {
      const bench::HostLoad load = r.runs[i].host_load.value_or(bench::HostLoad{});
      fmt::print(stderr,
                 "warning: mode {}: the host stalled {} times for over {:.0f} us (longest {:.1f} ms; most stolen "
                 "core {:.2f}%, {} involuntary context switches); RT latency tails of that size are the host's, not "
                 "the scheduler's\n",
                 r.runs[i].mode, s->over_threshold, s->threshold_us, s->longest_us / 1e3, 100.0 * load.steal_max_core,
                 load.involuntary_switches);
    }
  }
}

void print_table(const bench::BenchResults& r, double duration_s) {
  fmt::print("DISB {} ({}), {} s per mode on {}, RT order {}\n", r.workload.name, r.workload.description, duration_s,
             r.device, r.rt_order);
  if (r.rt_l2 != "off" && !r.runs.empty()) {
    fmt::print("RT clients' {} persisting in L2: {:.1f} MiB set aside\n", r.rt_l2,
               static_cast<double>(r.runs.front().l2_persisting_bytes) / (1024.0 * 1024.0));
  }
  print_mode_rows(r);
  print_latency_split(r);
  print_host_diagnostics(r);
  print_run_warnings(r);
}

void run_disb_command(const DisbFlags& f) {
  bench::DisbOptions o;
  if (!f.modes.empty()) {
    o.modes.clear();
    for (const std::string& m : f.modes) o.modes.push_back(sched::mode_from_name(m));
  }
  o.duration_s = f.duration_s;
  o.device = f.device;
  o.seed = f.seed;
  o.timeline_ms = f.timeline_ms;
  o.warmup_s = f.warmup_s;
  o.inflight_cap = f.cap;
  o.be_queue_ns = std::llround(f.be_queue_us * 1e3);
  o.padding_rt_budget = f.padding_rt_budget;
  o.rt_l2 = rt_l2_buffer(f.rt_l2, f.device);
  o.rt_l2_budget_bytes = rt_l2_budget_bytes(f.rt_l2);
  o.rt_path = rt_path_options(f.rt_path);
  o.rt_order = sched::rt_order_from_name(f.rt_order);
  o.commit = ATOLL_GIT_COMMIT;
  for (const std::string& path : f.profiles) o.profiles.push_back(load_profile(path));
  const bool all = f.workload == "all";
  const std::vector<std::string> names = all ? bench::shipped_workloads() : std::vector<std::string>{f.workload};
  // Every file is read and checked before the first (long) run starts.
  std::vector<bench::Workload> workloads;
  const auto out_dir = [&](const bench::Workload& w) {
    return all ? (std::filesystem::path(f.out) / w.name).string() : f.out;
  };
  for (const std::string& n : names) {
    workloads.push_back(bench::load_disb_workload(n, workload_dirs()));
    // A workload name becomes a directory name: one path component, never a way out of --out.
    const std::optional<std::string> bad_name = file_name_problem(workloads.back().name);
    ATOLL_CHECK(!bad_name, kInvalidArgument, "workload name '{}' {}", workloads.back().name, bad_name.value_or(""));
    for (const bench::ClientSpec& c : workloads.back().clients) {
      bench::check_arrival_count(c, std::max(o.duration_s, o.warmup_s) * 1000.0);
    }
    bench::check_record_bytes(workloads.back(), o);  // with `all`, before the first workload runs
    bench::check_disb_output_dir(out_dir(workloads.back()));
  }
  prepare_output_dir(f.out, "--out");
  ProgressLine progress;
  o.on_progress = [&](const bench::DisbProgress& p) { progress.update(p); };
  for (const bench::Workload& w : workloads) {
    const bench::BenchResults r = bench::run_disb(w, o);
    const std::string dir = out_dir(w);
    bench::write_disb_outputs(r, dir);
    progress.clear();
    print_table(r, f.duration_s);
    fmt::print("wrote {}/{{results.json, results.csv, report.html, trace.json}}\n\n", dir);
  }
}

struct PairFlags {
  std::vector<std::string> models = bench::PairOptions{}.models;
  std::vector<std::string> modes{"rt-only", "reset", "streams", "padding-concurrent", "padding-slices"};
  double duration_s = 1.0;
  int64_t batch = 1;
  std::string device = "sim";
  std::string json;
  std::vector<std::string> profiles;
  double padding_rt_budget = 0;  // a fraction (--padding-rt-budget)
};

void print_pairs(const bench::PairResults& r) {
  fmt::print("RT + BE pairs, both closed loop, batch {}, {} s per pair and mode on {}\n", r.batch, r.duration_s,
             r.device);
  // With the padding guard on, the RT tasks it ran with nothing beside them.
  const bool guarded = r.padding_rt_budget > 0;
  fmt::print("{:<14} {:<14} {:<19} {:>10} {:>10} {:>8} {:>8} {:>9} {:>7} {:>7} {:>7}{}\n", "RT", "BE", "mode",
             "RT mean ms", "RT p99 ms", "RT/s", "BE/s", "total/s", "padded", "slices", "capped",
             guarded ? fmt::format(" {:>7}", "alone") : "");
  for (const bench::PairModeResult& p : r.runs) {
    fmt::print("{:<14} {:<14} {:<19} {:>10.3f} {:>10.3f} {:>8.1f} {:>8.1f} {:>9.1f} {:>7} {:>7} {:>7}{}\n", p.rt, p.be,
               p.mode, p.rt_latency_ms.mean_ms, p.rt_latency_ms.p99_ms, p.rt_per_s, p.be_per_s, p.overall_per_s(),
               p.padded_kernels, p.padded_slices, p.padded_capped,
               guarded ? fmt::format(" {:>7}", p.padding_guarded) : "");
  }
  fmt::print("\n{:<19} {:>16} {:>17} {:>14} {:>16}\n", "mode", "RT vs rt-only", "worst pair", "total/reset",
             "total/streams");
  for (const bench::PairModeSummary& s : r.summary) {
    fmt::print("{:<19} {:>+15.2f}% {:>+16.2f}% {:>13.2f}x {:>15.2f}x\n", s.mode, s.rt_overhead_mean_pct,
               s.rt_overhead_worst_pct, s.throughput_vs_reset, s.throughput_vs_streams);
  }
  if (r.winners.empty()) return;
  fmt::print("\nbest mode per pair with RT mean within +{:.0f}% of rt-only:\n", bench::kWinnerRtBudgetPct);
  for (const bench::PairWinner& w : r.winners) {
    fmt::print("{:<14} {:<14} {:<19} {:>+7.2f}% {:>9.1f}/s\n", w.rt, w.be, w.mode, w.rt_overhead_pct, w.overall_per_s);
  }
}

void run_pairs_command(const PairFlags& f) {
  bench::PairOptions o;
  o.models = f.models;
  o.modes.clear();
  for (const std::string& m : f.modes) o.modes.push_back(sched::mode_from_name(m));
  o.duration_s = f.duration_s;
  o.batch = f.batch;
  o.device = f.device;
  o.padding_rt_budget = f.padding_rt_budget;
  for (const std::string& path : f.profiles) o.profiles.push_back(load_profile(path));
  if (!f.json.empty()) check_file_writable(f.json);  // before the pairs run, not after
  const bool tty = isatty(STDERR_FILENO) == 1;
  o.on_progress = [tty](const std::string& what) {
    if (!tty) return;
    fmt::print(stderr, "\r\033[K{}", what);
    std::fflush(stderr);
  };
  const bench::PairResults r = bench::run_pairs(o);
  if (tty) fmt::print(stderr, "\r\033[K");
  if (!f.json.empty()) write_file_atomic(f.json, bench::pairs_to_json(r));
  print_pairs(r);
}

void add_pairs_command(CLI::App& bench, const std::vector<std::string>& modes) {
  auto* cmd = bench.add_subcommand(
      "pairs", "One RT and one BE client, both closed loop, for every pair of models, under each mode");
  auto f = std::make_shared<PairFlags>();
  cmd->add_option("--models", f->models, "Zoo models, comma-separated (every ordered pair runs)")->delimiter(',');
  cmd->add_option("--modes", f->modes, fmt::format("Modes, comma-separated: {}", fmt::join(modes, ", ")))
      ->delimiter(',')
      ->check(CLI::IsMember(modes));
  cmd->add_option("--duration", f->duration_s, "Seconds per pair and mode (simulated time on sim)")
      ->check(CLI::Range(1e-3, 3600.0));
  cmd->add_option("--batch", f->batch, "Batch size of every client")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--device", f->device, "sim or cuda")->check(CLI::IsMember({"sim", "cuda"}));
  cmd->add_option("--json", f->json, "Write the results here");
  cmd->add_option("--profile", f->profiles, "Kernel profiles from `atoll profile` (repeatable)")
      ->check(CLI::ExistingFile);
  add_padding_budget_flag(cmd, f->padding_rt_budget);
  cmd->callback([f] { run_pairs_command(*f); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto* cmd = bench->add_subcommand(
      "disb", "DISB: RT and BE clients sharing the device under every scheduling mode (docs/DISB.md)");
  auto f = std::make_shared<DisbFlags>();
  cmd->add_option("--workload", f->workload, "A, B, C, D, E, F, G, REAL, all, or a workload JSON file")->required();
  std::vector<std::string> modes;
  for (const sched::Mode m : sched::all_modes()) modes.push_back(sched::mode_name(m));
  cmd->add_option("--modes", f->modes,
                  fmt::format("Modes to run, comma-separated (default: every mode): {}", fmt::join(modes, ", ")))
      ->delimiter(',')
      ->check(CLI::IsMember(modes));
  cmd->add_option("--duration", f->duration_s, "Seconds of arrivals per mode (simulated time on sim)")
      ->check(CLI::Range(1e-3, 3600.0));
  cmd->add_option("--device", f->device, "sim or cuda")->check(CLI::IsMember({"sim", "cuda"}));
  cmd->add_option("--out", f->out, "Output directory (with `all`, one subdirectory per workload)");
  cmd->add_option("--seed", f->seed, "Seed for Poisson arrivals, inputs and weights")->check(kWholeUint64);
  cmd->add_option("--timeline-ms", f->timeline_ms, "Length of the trace.json timeline window, ms")
      ->check(CLI::Range(0.0, 10000.0));
  cmd->add_option("--warmup", f->warmup_s,
                  "Seconds of every client together, unmeasured, before the measured runs (real devices only)")
      ->check(CLI::Range(0.0, 600.0));
  cmd->add_option("--cap", f->cap, "Kernels a BE stream may have on the device at once")->check(CLI::Range(1, 1 << 20));
  add_be_queue_flag(cmd, f->be_queue_us);
  add_padding_budget_flag(cmd, f->padding_rt_budget);
  add_rt_l2_flags(cmd, f->rt_l2);
  add_rt_path_flags(cmd, f->rt_path);
  cmd->add_option("--rt-order", f->rt_order,
                  "Which waiting RT request runs next: fifo (first arrived) or edf (earliest deadline, from each "
                  "client's deadline_ms)")
      ->check(CLI::IsMember({"fifo", "edf"}));
  cmd->add_option("--profile", f->profiles,
                  "Kernel profiles from `atoll profile` (repeatable): the padding modes plan with them, and the "
                  "simulator runs their measured times; padding modes profile models without one on the device")
      ->check(CLI::ExistingFile);
  cmd->callback([f] { run_disb_command(*f); });
  add_pairs_command(*bench, modes);
  add_serve_bench_command(*bench);
}

}  // namespace atl::apps
