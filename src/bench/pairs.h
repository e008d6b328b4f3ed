#pragma once
// The high-contention pair benchmark of the padding issue (REEF's): one RT and one BE client,
// both closed loop, for every ordered pair of a model set, under each scheduling mode. Reports
// RT latency against rt-only and overall throughput (RT + BE requests per second) against
// reset and streams. Each model is loaded twice on one device (an RT and a BE instance), so a
// run of 25 pairs loads ten instances, not a hundred.
#include <functional>
#include <string>
#include <vector>

#include "profile/kernel_profile.h"
#include "runtime/session.h"
#include "sched/modes.h"
#include "sched/sim_exec_device.h"

namespace atl::bench {

struct PairOptions {
  std::vector<std::string> models{"vgg19", "resnet152", "densenet201", "inception_v3", "bert_base"};
  std::vector<sched::Mode> modes{sched::Mode::kRtOnly, sched::Mode::kReset, sched::Mode::kStreams,
                                 sched::Mode::kPaddingConcurrent, sched::Mode::kPaddingSlices};
  int64_t batch = 1;
  double duration_s = 1.0;  // per pair and mode (simulated time on the simulator)
  double warmup_s = 0.1;    // per pair, in seq mode, unmeasured (real devices only)
  uint64_t seed = 0;
  int inflight_cap = 4;
  double padding_rt_budget = 0;  // SchedulerOptions::padding_rt_budget
  std::string device = "sim";
  sched::SimExecOptions sim;
  std::vector<ModelProfile> profiles;  // as DisbOptions::profiles
  std::function<void(const std::string& what)> on_progress;
};

struct PairModeResult {
  std::string rt, be, mode;
  LatencyStats rt_latency_ms;  // requests finished within the run
  double rt_per_s = 0, be_per_s = 0;
  double overall_per_s() const { return rt_per_s + be_per_s; }
  int64_t padded_kernels = 0, padded_slices = 0, padded_capped = 0, preemptions = 0;
  int64_t padding_guarded = 0;  // RT tasks run with nothing padded beside them (padding_rt_budget)
};

// Per mode, across pairs: RT mean latency against rt-only (mean and worst pair, in percent) and
// overall throughput against reset and streams (mean ratio). Fields without their baseline
// mode in the run stay 0.
struct PairModeSummary {
  std::string mode;
  double rt_overhead_mean_pct = 0, rt_overhead_worst_pct = 0;
  double throughput_vs_reset = 0, throughput_vs_streams = 0;
};

// Per pair, the mode that served the most requests in all while keeping RT mean latency within
// `rt_budget_pct` of rt-only (rt-only itself always qualifies): which mode wins where.
struct PairWinner {
  std::string rt, be, mode;
  double rt_overhead_pct = 0;
  double overall_per_s = 0;
};
// Issue 14's RT target for the padding modes: +1% mean latency over rt-only.
inline constexpr double kWinnerRtBudgetPct = 1.0;

struct PairResults {
  std::string device;
  double duration_s = 0;
  int64_t batch = 1;
  double padding_rt_budget = 0;      // PairOptions::padding_rt_budget
  std::vector<PairModeResult> runs;  // pair-major, modes in the order given
  std::vector<PairModeSummary> summary;
  std::vector<PairWinner> winners;  // within kWinnerRtBudgetPct, pairs in run order
};

PairResults run_pairs(const PairOptions& options);
std::vector<PairModeSummary> summarize_pairs(const std::vector<PairModeResult>& runs,
                                             const std::vector<sched::Mode>& modes);
// Pairs without an rt-only run get no winner.
std::vector<PairWinner> pair_winners(const std::vector<PairModeResult>& runs, double rt_budget_pct);
std::string pairs_to_json(const PairResults& results);

}  // namespace atl::bench
