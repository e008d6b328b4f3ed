#pragma once
// The GPU fitness evaluator of AutoScratch: a residency config's effect on the measured iteration
// time of a loaded model, against the incumbent (no residency). Needs the CUDA backend; builds
// without it throw kUnsupported.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "l2/evaluator.h"
#include "l2/slices.h"

namespace atl {

struct L2MeasureOptions {
  // Pairs (one incumbent and one config sample) measured first, then added step_pairs at a time
  // until the 95% confidence interval of the median paired difference is narrower than
  // target_ci of the incumbent's median on each side, or max_pairs is reached.
  int min_pairs = 20;
  int step_pairs = 10;
  int max_pairs = 200;
  double target_ci = 0.01;
  // Energy per iteration from NVML (loaded at run time; skipped with a note if it is missing),
  // each side running back to back for about energy_ms.
  bool energy = false;
  double energy_ms = 500.0;
};

struct L2Measurement {
  int pairs = 0;
  double baseline_ms = 0;     // median iteration time without residency
  double config_ms = 0;       // median iteration time with the config applied
  double speedup = 0;         // baseline_ms / config_ms
  double median_diff_ms = 0;  // median of (config - baseline) over the pairs; negative = faster
  double diff_ci_ms = 0;      // half-width of its 95% confidence interval
  std::vector<double> baseline_samples_ms, config_samples_ms;  // in measurement order
  int64_t setaside_bytes = 0;                                  // the config's set-aside request
  int64_t granted_setaside_bytes = 0;                          // what the driver reported while it was applied
  std::optional<double> baseline_energy_mj, config_energy_mj;  // per iteration
  std::string energy_note;                                     // why energy is missing, when asked for and absent
};

// The windows the CUDA backend applies for `config` (planned by l2::plan_windows, which checks
// the config against the instance's Program and the device `d`: a config for another Program
// throws kInvalidArgument). Then measures as described above; `config` == nullptr measures the
// incumbent against itself (the noise floor). Uses the instance's current inputs; runs kernel by
// kernel behind a device-side wait, one untimed warm-up iteration before each timed one, and
// leaves the instance with no residency, persisting lines reset and the limit at 0.
// Throws kUnsupported when the instance is not a CUDA one or the build has no CUDA.
L2Measurement measure_l2(Instance& instance, const l2::ResidencyConfig* config, const l2::L2Device& d,
                         const L2MeasureOptions& options = {});

void to_json(nlohmann::json& j, const L2Measurement& m);

// Applies `config` to a loaded instance for the runs that follow (`atoll run --l2`): the windows
// l2::plan_windows makes for device `d` (a config for another Program throws kInvalidArgument),
// the set-aside, persisting lines reset. nullptr removes it: windows off, persisting lines reset,
// limit 0. Returns the set-aside the driver granted (0 after removal). Throws kUnsupported when
// the instance is not a CUDA one or the build has no CUDA.
int64_t apply_l2_config(Instance& instance, const l2::ResidencyConfig* config, const l2::L2Device& d);

// The GPU fitness of a config for the tuners: its iteration time relative to no residency, from
// one paired measurement (measure_l2), cost = 1 + median paired difference / median time without
// residency. Paired against the incumbent each time, so drift between evaluations cancels; a
// config with no resident slice is measured against itself (the noise floor). The instance must
// stay alive and loaded; the constructor throws kUnsupported unless it is a CUDA instance.
class CudaL2Evaluator : public l2::ProgramEvaluator {
 public:
  CudaL2Evaluator(Instance& instance, l2::L2Device d, double hit_ratio, L2MeasureOptions options = {});
  std::string name() const override { return "cuda (" + device().name + ")"; }
  std::string cost_unit() const override { return "time / time without residency"; }
  bool deterministic() const override { return false; }
  l2::Fitness evaluate(const l2::Residency& resident) override;

 private:
  Instance& instance_;
  L2MeasureOptions options_;
};

}  // namespace atl
