// The DISB runner with user workloads of tiny models: every load type, overload (requests
// dropped, never skipped), determinism on the simulator, and the real-time path on a device
// whose clock is the host's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/runner.h"
#include "disb_checks.h"
#include "wall_clock_device.h"

namespace atl::bench {
namespace {

using testing::expect_requests_conserved;
using testing::ScratchDir;

// Two RT clients (Poisson, trace) and two BE clients (closed loop with 3 outstanding, periodic).
Workload mixed_workload(const std::string& dir) {
  {
    std::ofstream t(dir + "/cam.trace");
    t << "# ms\n0\n3.5\n3.5\n9\n17.25\n";
  }
  const std::string path = dir + "/mixed.json";
  {
    std::ofstream f(path);
    f << R"({"name": "mixed", "description": "every load type", "clients": [
      {"name": "rt-poisson", "model": "tiny_vgg", "priority": "rt", "load": {"type": "poisson", "rate": 500},
       "deadline_ms": 5},
      {"name": "rt-trace", "model": "tiny_vgg", "priority": "rt", "load": {"type": "trace", "file": "cam.trace"}},
      {"name": "be-closed", "model": "tiny_cnn", "priority": "be", "load": {"type": "closed", "concurrency": 3}},
      {"name": "be-periodic", "model": "tiny_bert", "batch": 2, "seq": 24, "priority": "be",
       "load": {"type": "periodic", "rate": 200}}]})";
  }
  return load_disb_workload(path, {});
}

Workload single_rt(const std::string& dir, double rate_hz) {
  const std::string path = dir + "/single.json";
  {
    std::ofstream f(path);
    f << R"({"name": "single", "clients": [
      {"name": "rt", "model": "tiny_vgg", "priority": "rt", "load": {"type": "periodic", "rate": )"
      << rate_hz << R"(}},
      {"name": "be", "model": "tiny_cnn", "priority": "be", "load": {"type": "closed"}}]})";
  }
  return load_disb_workload(path, {});
}

DisbOptions quick(std::vector<sched::Mode> modes, double duration_s) {
  DisbOptions o;
  o.modes = std::move(modes);
  o.duration_s = duration_s;
  o.standalone_s = duration_s / 2;
  o.grace_s = 0.1;
  o.timeline_ms = 10;
  o.seed = std::random_device{}();
  o.keep_every_record = true;  // expect_requests_conserved reads every request
  return o;
}

TEST(DisbLoads, EveryLoadTypeConservesRequestsAndReportsProgress) {
  const ScratchDir dir("mixed");
  const Workload w = mixed_workload(dir.path());
  DisbOptions o = quick({sched::Mode::kRtOnly, sched::Mode::kSeq, sched::Mode::kReset}, 0.2);
  SCOPED_TRACE("seed " + std::to_string(o.seed));
  std::vector<DisbProgress> seen;
  o.on_progress = [&](const DisbProgress& p) { seen.push_back(p); };
  const BenchResults r = run_disb(w, o);
  ASSERT_EQ(r.runs.size(), 3u);
  for (const ModeRun& run : r.runs) expect_requests_conserved(w, run, o.seed);
  const ModeStats& reset = r.stats[2];
  EXPECT_GT(reset.clients[2].served, 3);  // the closed loop went round
  EXPECT_GT(reset.clients[3].served, 0);
  EXPECT_GT(reset.clients[0].standalone_p50_ms, 0);
  EXPECT_GT(reset.clients[1].standalone_p50_ms, 0);

  // Phases in order, each starting with its full time and counting down.
  std::vector<std::string> phases;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i > 0 && seen[i].phase == seen[i - 1].phase) {
      EXPECT_LE(seen[i].seconds_left, seen[i - 1].seconds_left);
      continue;
    }
    phases.push_back(seen[i].phase);
    EXPECT_EQ(seen[i].workload, "mixed");
    EXPECT_EQ(seen[i].mode_count, 3);
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"compile", "standalone rt-poisson", "standalone rt-trace", "rt-only",
                                              "seq", "reset"}));
  EXPECT_EQ(seen.back().mode_index, 3);
}

// The simulated GPU has no L2 to persist in: asking for it is a clear error before any mode
// runs, not a silently unprotected run.
TEST(DisbLoads, RtL2PersistenceOnTheSimulatorIsUnsupported) {
  const ScratchDir dir("persist");
  const Workload w = single_rt(dir.path(), 100);
  DisbOptions o = quick({sched::Mode::kRtOnly}, 0.02);
  o.rt_l2 = L2Persist::kWeights;
  try {
    run_disb(w, o);
    FAIL() << "ran without L2 persistence";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("L2 persistence"), std::string::npos) << e.what();
  }
}

TEST(DisbLoads, SimulatedRunsRepeatExactly) {
  const ScratchDir dir("repeat");
  const Workload w = mixed_workload(dir.path());
  DisbOptions o = quick({sched::Mode::kStreams, sched::Mode::kReset}, 0.1);
  const nlohmann::json first = results_json(run_disb(w, o));
  EXPECT_EQ(results_json(run_disb(w, o)), first);
  // The seed moves the Poisson arrivals.
  ++o.seed;
  const nlohmann::json other = results_json(run_disb(w, o));
  EXPECT_NE(other["modes"][1]["clients"][0]["latency_ms"], first["modes"][1]["clients"][0]["latency_ms"]);
}

TEST(DisbLoads, OverloadDropsRequestsInsteadOfSkippingThem) {
  // 100,000 requests/s of a model that takes tens of us: most cannot be answered in time.
  const ScratchDir dir("overload");
  const Workload w = single_rt(dir.path(), 100000);
  DisbOptions o = quick({sched::Mode::kReset}, 0.02);
  o.grace_s = 0.005;
  const BenchResults r = run_disb(w, o);
  expect_requests_conserved(w, r.runs[0], o.seed);
  const ClientStats& rt = r.stats[0].clients[0];
  EXPECT_GT(rt.served, 0);
  EXPECT_GT(rt.dropped, 0);
  EXPECT_EQ(rt.served + rt.dropped, 2000);
  // The default deadline of a periodic client is its period, 10 us: nothing meets it.
  EXPECT_DOUBLE_EQ(rt.deadline_miss_rate, 1.0);
  // RT work never stops, so the BE client's first request is never served.
  EXPECT_EQ(r.stats[0].clients[1].served, 0);
  EXPECT_EQ(r.stats[0].clients[1].dropped, 1);
}

// A deadline of 1e300 ms does not fit the device clock: it is never due (it used to overflow).
TEST(DisbLoads, DeadlinesPastTheClockRangeAreNeverDue) {
  const Workload w = parse_workload(
      R"({"name": "far", "clients": [
        {"name": "rt", "model": "tiny_cnn", "priority": "rt", "load": {"type": "periodic", "rate": 1000},
         "deadline_ms": 1e300},
        {"name": "rt2", "model": "tiny_vgg", "priority": "rt", "load": {"type": "periodic", "rate": 1000},
         "deadline_ms": 1}]})",
      "far.json", ".");
  DisbOptions o = quick({sched::Mode::kReset}, 0.05);
  o.rt_order = sched::RtOrder::kDeadline;
  const BenchResults r = run_disb(w, o);
  expect_requests_conserved(w, r.runs[0], o.seed);
  EXPECT_EQ(r.stats[0].clients[0].served, 50);
  EXPECT_EQ(r.stats[0].clients[0].deadline_miss_rate, 0.0);
}

constexpr sched::DeviceTime kWallKernelNs = 20'000;

TEST(DisbRealTime, SchedulerThreadAndSubmitterOnTheWallClock) {
  const ScratchDir dir("wall");
  const Workload w = single_rt(dir.path(), 200);
  DisbOptions o = quick({sched::Mode::kRtOnly, sched::Mode::kReset}, 0.3);
  o.grace_s = 0.2;
  o.make_device = [] { return std::make_unique<testing::WallClockDevice>(kWallKernelNs); };
  std::vector<std::string> phases;
  o.on_progress = [&](const DisbProgress& p) {
    if (phases.empty() || phases.back() != p.phase) phases.push_back(p.phase);
  };
  const BenchResults r = run_disb(w, o);
  EXPECT_EQ(r.device.rfind("wall-clock", 0), 0u);
  // A real-time device gets the unmeasured warm-up before anything is measured; the simulator
  // does not (EveryLoadTypeConservesRequestsAndReportsProgress).
  EXPECT_EQ(phases, (std::vector<std::string>{"compile", "warm-up", "standalone rt", "rt-only", "reset"}));
  EXPECT_DOUBLE_EQ(r.warmup_s, o.warmup_s);
  EXPECT_GT(o.warmup_s, 0.0);
  for (const ModeRun& run : r.runs) {
    expect_requests_conserved(w, run, o.seed);
    // tiny_vgg's 8 kernels run one after another on one stream: a floor under RT latency.
    for (const RequestRecord& q : run.requests) {
      if (q.client == 0 && !q.dropped) {
        EXPECT_GE(q.finish_ms - q.arrival_ms, 8 * kWallKernelNs / 1e6);
      }
    }
  }
  const ClientStats& rt = r.stats[1].clients[0];
  EXPECT_EQ(rt.served, 60);  // 200/s for 0.3 s, each a fraction of a ms of device work
  EXPECT_EQ(rt.dropped, 0);
  EXPECT_GT(r.stats[1].clients[1].served, 0);
}

TEST(DisbRealTime, LateRequestsAreDroppedOnTheWallClockToo) {
  // 20,000/s of 8 x 20 us requests: about an eighth can be served.
  const ScratchDir dir("wall_overload");
  const Workload w = single_rt(dir.path(), 20000);
  DisbOptions o = quick({sched::Mode::kRtOnly}, 0.1);
  o.grace_s = 0.02;
  o.make_device = [] { return std::make_unique<testing::WallClockDevice>(kWallKernelNs); };
  const BenchResults r = run_disb(w, o);
  expect_requests_conserved(w, r.runs[0], o.seed);
  const ClientStats& rt = r.stats[0].clients[0];
  EXPECT_GT(rt.served, 0);
  EXPECT_GT(rt.dropped, 0);
  EXPECT_EQ(rt.served + rt.dropped, 2000);
}

}  // namespace
}  // namespace atl::bench
