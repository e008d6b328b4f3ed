// Padding's selection time (issue 14: under 1 us per decision). At each look the padding modes
// estimate the running RT kernel from the RT task's profile (estimated_rt_window) and test each
// idle BE lane's next kernel against it (fits_beside), counting the SM share of what they pad.
// Here that decision runs on the simulator's profiles of issue 14's pair models at batch 1, with
// RT tasks reporting as the scheduler has them report (SchedulerOptions' defaults), at RT kernel
// positions, elapsed times and BE kernels drawn from a fixed-seed generator.
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/model_source.h"
#include "sched/padding.h"
#include "sched/profiles.h"
#include "sched/scheduler.h"

namespace {

using atl::sched::DeviceTime;
using atl::sched::KernelCosts;

const std::vector<std::string> kPairModels = {"vgg19", "resnet152", "densenet201", "inception_v3", "bert_base"};

// Each pair model's simulated profile at batch 1, made once per process.
const KernelCosts& costs_of(const std::string& model) {
  static std::map<std::string, KernelCosts> costs;
  auto it = costs.find(model);
  if (it == costs.end()) {
    atl::sched::ProfileRequest r;
    r.model = atl::ZooModel{.name = model, .batch = 1, .seed = 0};
    r.device = "sim";
    KernelCosts c = KernelCosts::from(atl::sched::profile_zoo_model(r));
    c.reported = atl::sched::padding_reports(c, atl::sched::SchedulerOptions{}.padding_resync_ns);
    it = costs.emplace(model, std::move(c)).first;
  }
  return it->second;
}

// One look: the RT model kPairModels[range(0)] runs, and range(1) BE lanes (the other models in
// turn) each offer their next kernel. Time per look, and how many kernels it padded.
void BM_PaddingLook(benchmark::State& state) {
  const auto rt_model = static_cast<size_t>(state.range(0));
  const KernelCosts& rt = costs_of(kPairModels[rt_model]);
  std::vector<const KernelCosts*> be;
  for (size_t m = 0; be.size() < static_cast<size_t>(state.range(1)); ++m) {
    if (m % kPairModels.size() != rt_model) be.push_back(&costs_of(kPairModels[m % kPairModels.size()]));
  }
  const atl::sched::SchedulerOptions options;
  std::mt19937_64 rng(1);
  // Looks drawn ahead, so the generator is not timed: the RT kernel, time since it was first
  // seen, and each lane's next kernel.
  constexpr size_t kLooks = 4096;
  struct Look {
    int rt_kernel;
    DeviceTime elapsed;
    std::vector<int> be_kernel;
  };
  std::vector<Look> looks(kLooks);
  for (Look& l : looks) {
    l.rt_kernel = static_cast<int>(rng() % rt.ns.size());
    l.elapsed = static_cast<DeviceTime>(rng() % static_cast<uint64_t>(2 * rt.ns[static_cast<size_t>(l.rt_kernel)] + 1));
    for (const KernelCosts* b : be) l.be_kernel.push_back(static_cast<int>(rng() % b->ns.size()));
  }
  const DeviceTime now = 1'000'000'000;
  size_t i = 0;
  int64_t padded = 0;
  for (auto _ : state) {
    const Look& l = looks[i++ % kLooks];
    atl::sched::RtWindow w =
        atl::sched::estimated_rt_window(rt, l.rt_kernel, now - l.elapsed, now, options.padding_drift);
    for (size_t b = 0; b < be.size(); ++b) {
      if (atl::sched::fits_beside(*be[b], l.be_kernel[b], w, options.padding_launch_ns)) {
        w.padded_share += be[b]->share[static_cast<size_t>(l.be_kernel[b])];
        ++padded;
      }
    }
    benchmark::DoNotOptimize(w);
  }
  state.counters["padded_per_look"] = benchmark::Counter(static_cast<double>(padded) / static_cast<double>(i));
  state.SetLabel(kPairModels[rt_model] + " RT");
}

BENCHMARK(BM_PaddingLook)->ArgsProduct({{0, 1, 2, 3, 4}, {1, 4, 16}})->ArgNames({"rt", "be_lanes"});

}  // namespace

BENCHMARK_MAIN();
