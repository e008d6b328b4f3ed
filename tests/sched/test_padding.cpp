// padding-concurrent on the simulated GPU: the fit rule alone and its cost, and one RT and one
// BE client, both closed loop (the high-contention pair of the padding benchmark): RT latency
// stays at rt-only's, BE throughput beats reset's, every request is answered once, and no
// padded kernel runs twice.
#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <map>

#include "core/error.h"
#include "runtime/model_source.h"
#include "sched/colocate.h"
#include "sched/padding.h"
#include "sched/profiles.h"

namespace atl::sched {
namespace {

// Costs for whole-kernel fits (fits_beside reads time and slot share only; slices are
// test_padding_slices.cpp's).
KernelCosts costs(std::vector<DeviceTime> ns, std::vector<double> share) {
  KernelCosts c;
  c.ns = std::move(ns);
  c.share = std::move(share);
  return c;
}

TEST(PaddingFit, TimeAndShareMustBothFit) {
  const KernelCosts rt = costs({100'000, 50'000}, {0.25, 0.5});
  const KernelCosts be = costs({10'000, 90'000, 10'000}, {0.5, 0.1, 0.6});
  const RtWindow w = rt_window(rt, 0, /*since=*/1'000'000, /*now=*/1'005'000);
  EXPECT_EQ(w.remaining_ns, 95'000);
  EXPECT_TRUE(fits_beside(be, 0, w, 6'000));
  EXPECT_TRUE(fits_beside(be, 1, w, 5'000));
  EXPECT_FALSE(fits_beside(be, 2, w, 6'000)) << "0.6 of the SMs beside the next RT kernel's 0.5";
  RtWindow padded = w;
  padded.padded_share = 0.5;
  EXPECT_FALSE(fits_beside(be, 0, padded, 6'000)) << "0.5 already padded, 0.5 more, beside 0.25";
  const RtWindow overran = rt_window(rt, 1, 0, 60'000);
  EXPECT_LT(overran.remaining_ns, 0);
  EXPECT_FALSE(fits_beside(be, 0, overran, 0)) << "the kernel overran its profile: nothing fits";
  EXPECT_FALSE(fits_beside(be, 0, RtWindow{}, 0)) << "no RT kernel runs";
}

// A BE kernel longer than what is left of the current RT kernel fits across the next ones, as
// long as its share fits beside each of them and beside the one after its end.
TEST(PaddingFit, ABeKernelMaySpanSeveralRtKernels) {
  const KernelCosts rt = costs({10'000, 10'000, 10'000, 10'000, 10'000}, {0.2, 0.2, 0.2, 0.2, 0.9});
  const KernelCosts be = costs({20'000, 30'000, 3'000}, {0.5, 0.5, 0.5});
  const RtWindow w = rt_window(rt, 0, 0, 0);
  EXPECT_TRUE(fits_beside(be, 0, w, 5'000)) << "25 us over RT kernels 0-2, and kernel 3 leaves room";
  EXPECT_FALSE(fits_beside(be, 1, w, 5'000)) << "35 us reaches into RT kernel 3, so kernel 4 (0.9) counts";
  const KernelCosts alone = costs({10'000}, {0.2});
  EXPECT_FALSE(fits_beside(be, 0, rt_window(alone, 0, 0, 0), 5'000)) << "the task ends after 10 us";
  EXPECT_TRUE(fits_beside(be, 2, rt_window(alone, 0, 0, 0), 5'000)) << "8 us within its last kernel";
  const KernelCosts long_rt = costs(std::vector<DeviceTime>(20, 1'000), std::vector<double>(20, 0.1));
  EXPECT_FALSE(fits_beside(be, 0, rt_window(long_rt, 0, 0, 0), 0))
      << "the lookahead stops after " << kPaddingLookahead << " kernels";
}

// With one launch per RT task only its end reports: the window walks the profile from the
// task's start, and the time walked makes a padded kernel keep `drift` of it to spare.
TEST(PaddingFit, DriftSinceTheLastReportIsKeptToSpare) {
  KernelCosts rt = costs({100'000, 100'000, 100'000}, {0.2, 0.2, 0.2});
  rt.reported = padding_reports(rt, std::numeric_limits<DeviceTime>::max());
  EXPECT_EQ(rt.reported, (std::vector<uint8_t>{0, 0, 1}));
  const KernelCosts be = costs({30'000}, {0.5});
  const RtWindow early = estimated_rt_window(rt, 0, 0, 120'000, 0.05);
  EXPECT_EQ(early.kernel, 1);
  EXPECT_EQ(early.uncertainty_ns, 6'000);
  EXPECT_TRUE(fits_beside(be, 0, early, 5'000));
  const RtWindow late = estimated_rt_window(rt, 0, 0, 260'000, 0.05);
  EXPECT_EQ(late.kernel, 2);
  EXPECT_EQ(late.remaining_ns, 40'000);
  EXPECT_FALSE(fits_beside(be, 0, late, 0)) << "30 us + 13 us to spare > the 40 us left";
  EXPECT_TRUE(fits_beside(be, 0, estimated_rt_window(rt, 0, 0, 260'000, 0.0), 0)) << "no drift: 30 us fit";
}

// RT kernels report their end about every `spacing` of profiled time, and the last one always;
// between reports the window walks the profile, but never past a kernel that reports.
TEST(PaddingFit, SparseReportsAndTheEstimatedWindow) {
  KernelCosts rt = costs({40'000, 40'000, 40'000, 40'000, 40'000}, {0.2, 0.3, 0.4, 0.5, 0.6});
  EXPECT_EQ(padding_reports(rt, 100'000), (std::vector<uint8_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(padding_reports(rt, 0), (std::vector<uint8_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(padding_reports(rt, 1'000'000), (std::vector<uint8_t>{0, 0, 0, 0, 1}));
  rt.reported = padding_reports(rt, 100'000);
  const RtWindow at_start = estimated_rt_window(rt, 0, 1'000'000, 1'010'000);
  EXPECT_EQ(at_start.kernel, 0);
  EXPECT_EQ(at_start.remaining_ns, 30'000);
  const RtWindow walked = estimated_rt_window(rt, 0, 0, 50'000);
  EXPECT_EQ(walked.kernel, 1) << "kernel 0 reports nothing: by the profile, kernel 1 runs";
  EXPECT_EQ(walked.remaining_ns, 30'000);
  const RtWindow overran = estimated_rt_window(rt, 0, 0, 130'000);
  EXPECT_EQ(overran.kernel, 2) << "kernel 2 reports: the walk stops there";
  EXPECT_LT(overran.remaining_ns, 0);
  const KernelCosts be = costs({1'000}, {0.1});
  EXPECT_FALSE(fits_beside(be, 0, overran, 0)) << "past a reporting kernel's profile nothing fits";
  rt.reported.clear();
  EXPECT_EQ(estimated_rt_window(rt, 0, 0, 50'000).kernel, 0) << "every kernel reports: no walk";
}

// Selection reads a few array entries per BE lane: far below the 1 us budget.
TEST(PaddingFit, SelectionTakesWellUnderAMicrosecond) {
  std::vector<DeviceTime> ns(500);
  std::vector<double> share(500);
  for (size_t i = 0; i < ns.size(); ++i) {
    ns[i] = 1'000 + static_cast<DeviceTime>(i * 37 % 200) * 1'000;
    share[i] = static_cast<double>(i * 13 % 100) / 100.0 + 0.01;
  }
  const KernelCosts rt = costs(ns, share), be = costs(ns, share);
  constexpr int kQueries = 1'000'000;
  int fits = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int q = 0; q < kQueries; ++q) {
    const RtWindow w = rt_window(rt, q % 499, 0, q % 5'000);
    fits += fits_beside(be, (q * 7) % 500, w, 6'000) ? 1 : 0;
  }
  const double ns_per_query =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / kQueries;
  EXPECT_GT(fits, 0);
  EXPECT_LT(fits, kQueries);
  EXPECT_LT(ns_per_query, 1000.0);
  RecordProperty("ns_per_selection", std::to_string(ns_per_query));
}

struct PairRun {
  WorkloadRun run;
  std::vector<sim::SimLaunchRecord> trace;
  InstanceId be_instance = -1;
  int be_kernels = 0;
};

// RT and BE clients, both closed loop, on the simulated GPU for `ms` of simulated time.
PairRun run_pair(Mode mode, const std::string& rt_model, const std::string& be_model, double ms) {
  SimExecOptions options;
  options.record_trace = true;
  SimExecDevice device(options);
  std::vector<ModelProfile> profiles;
  Workload w;
  w.duration = static_cast<DeviceTime>(ms * 1e6);
  w.scheduler.mode = mode;
  PairRun pair;
  const auto add = [&](const std::string& model, TaskClass cls) {
    const CompiledModel cm = compile_zoo_model({.name = model}, device.target(), false);
    WorkloadClient c;
    c.name = model;
    c.task_class = cls;
    c.instance = device.load(cm.program, cm.weights);
    attach_profile(device, c.instance, profiles, mode_traits(mode).pads_be);
    c.closed_loop = true;
    c.inputs = seeded_inputs(cm.program, 1);
    w.clients.push_back(std::move(c));
    return std::pair{w.clients.back().instance, static_cast<int>(cm.program.kernels.size())};
  };
  add(rt_model, TaskClass::kRealTime);
  if (mode != Mode::kRtOnly) std::tie(pair.be_instance, pair.be_kernels) = add(be_model, TaskClass::kBestEffort);
  pair.run = run_workload(device, w);
  pair.trace = device.gpu().trace();
  return pair;
}

struct PairStats {
  double rt_mean_ms = 0;
  int64_t rt_served = 0, be_served = 0;
};

PairStats stats_of(const PairRun& p) {
  PairStats s;
  for (const RequestOutcome& o : p.run.requests) {
    if (o.status != RequestStatus::kServed || o.result.finish > p.run.end) continue;
    if (o.result.task_class == TaskClass::kRealTime) {
      ++s.rt_served;
      s.rt_mean_ms += static_cast<double>(o.result.latency()) / 1e6;
    } else {
      ++s.be_served;
    }
  }
  if (s.rt_served > 0) s.rt_mean_ms /= static_cast<double>(s.rt_served);
  return s;
}

// On the simulator a kernel longer than 20 us fills every slot (split-K), so BE kernels pad only
// RT kernels of at most 20 us: a BE model of short kernels (tiny_cnn: 13 kernels of 2-3 us, on a
// few slots) beside ResNet-50 (57 kernels of 2-20 us). A BE kernel longer than every RT kernel
// never fits and waits for the RT queue to empty, which closed-loop RT never does.
constexpr const char* kRt = "resnet50";
constexpr const char* kBe = "tiny_cnn";
constexpr double kRunMs = 40;

TEST(PaddingConcurrent, KeepsRtLatencyAndBeatsResetOnBeThroughput) {
  const PairStats alone = stats_of(run_pair(Mode::kRtOnly, kRt, kBe, kRunMs));
  const PairRun padded = run_pair(Mode::kPaddingConcurrent, kRt, kBe, kRunMs);
  const PairStats pad = stats_of(padded);
  const PairStats reset = stats_of(run_pair(Mode::kReset, kRt, kBe, kRunMs));
  ASSERT_GT(alone.rt_served, 5);
  EXPECT_GT(padded.run.stats.padded_kernels, 0);
  EXPECT_LE(pad.rt_mean_ms, alone.rt_mean_ms * 1.03) << "rt-only " << alone.rt_mean_ms << " ms";
  EXPECT_GT(pad.be_served, reset.be_served);
  RecordProperty("rt_mean_ms", fmt::format("rt-only {:.4f} padding {:.4f} reset {:.4f}", alone.rt_mean_ms,
                                           pad.rt_mean_ms, reset.rt_mean_ms));
  RecordProperty("be_served", fmt::format("padding {} reset {} (padded kernels {})", pad.be_served, reset.be_served,
                                          padded.run.stats.padded_kernels));
}

TEST(PaddingConcurrent, AnswersEveryRequestOnceAndNeverRunsAPaddedKernelTwice) {
  const PairRun p = run_pair(Mode::kPaddingConcurrent, kRt, kBe, kRunMs);
  ASSERT_GT(p.run.stats.padded_kernels, 0);
  int64_t served = 0;
  for (const RequestOutcome& o : p.run.requests) {
    ASSERT_NE(o.status, RequestStatus::kFailed);
    served += o.status == RequestStatus::kServed ? 1 : 0;
  }
  EXPECT_EQ(served, p.run.stats.rt_completed + p.run.stats.be_completed);
  EXPECT_EQ(p.run.stats.failed, 0);
  // BE launches in stream order: a padded (non-preemptible) kernel k is always followed by
  // kernel k + 1 of the same task, or kernel 0 of the next: never by a second run of k.
  std::map<uint64_t, sim::SimLaunchRecord> be;
  for (const sim::SimLaunchRecord& r : p.trace) {
    if (r.tag == p.be_instance) be[r.seq] = r;
  }
  int padded = 0;
  for (auto it = be.begin(); it != be.end(); ++it) {
    if (it->second.preemptible) continue;
    ++padded;
    EXPECT_FALSE(it->second.cut);
    const auto next = std::next(it);
    if (next == be.end()) continue;
    EXPECT_EQ(next->second.kernel, (it->second.kernel + 1) % p.be_kernels) << "after padded launch " << it->first;
  }
  EXPECT_EQ(padded, p.run.stats.padded_kernels);
}

TEST(PaddingConcurrent, RefusesAClientWithoutAProfile) {
  SimExecDevice device;
  const CompiledModel cm = compile_zoo_model({.name = "tiny_cnn"}, device.target(), false);
  const InstanceId i = device.load(cm.program, cm.weights);
  SchedulerOptions options;
  options.mode = Mode::kPaddingConcurrent;
  Scheduler scheduler(device, options);
  try {
    scheduler.add_client(TaskClass::kBestEffort, "be", i);
    FAIL() << "a client without a profile was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("padding-concurrent needs a kernel profile"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("atoll profile tiny_cnn --batch 1 --device sim"), std::string::npos) << e.message();
  }
  device.set_profile(i, device.measure_profile(i, {}));
  EXPECT_NO_THROW(scheduler.add_client(TaskClass::kBestEffort, "be", i));
}

}  // namespace
}  // namespace atl::sched
