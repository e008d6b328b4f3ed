// The GPU fitness evaluator: paired, interleaved timing of a residency config against no
// residency, with the number of pairs set by the measured noise, and optional NVML energy.
#include "runtime/l2_measure.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/stats.h"
#include "runtime/nvml.h"
#include "runtime/session.h"

#ifdef ATOLL_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/timing.h"
#endif

namespace atl {

void to_json(nlohmann::json& j, const L2Measurement& m) {
  j = nlohmann::json{{"pairs", m.pairs},
                     {"baseline_ms", m.baseline_ms},
                     {"config_ms", m.config_ms},
                     {"speedup", m.speedup},
                     {"median_diff_ms", m.median_diff_ms},
                     {"diff_ci_ms", m.diff_ci_ms},
                     {"setaside_bytes", m.setaside_bytes},
                     {"granted_setaside_bytes", m.granted_setaside_bytes},
                     {"baseline_samples_ms", m.baseline_samples_ms},
                     {"config_samples_ms", m.config_samples_ms}};
  if (m.baseline_energy_mj) j["baseline_energy_mj"] = *m.baseline_energy_mj;
  if (m.config_energy_mj) j["config_energy_mj"] = *m.config_energy_mj;
  if (!m.energy_note.empty()) j["energy_note"] = m.energy_note;
}

#ifdef ATOLL_HAVE_CUDA

namespace {

constexpr int kMaxEnergyIterations = 100000;

L2Residency to_residency(const l2::WindowPlan& plan) {
  L2Residency r;
  r.setaside_bytes = plan.setaside_bytes;
  r.hit_ratio = plan.hit_ratio;
  r.windows.reserve(plan.windows.size());
  for (const l2::AccessWindow& w : plan.windows) r.windows.push_back(L2Window{w.offset, w.bytes});
  return r;
}

class Evaluator {
 public:
  Evaluator(CudaInstance& gpu, const L2Residency* residency)
      : gpu_(gpu),
        residency_(residency),
        kernels_(static_cast<int>(gpu.program().kernels.size())),
        start_(cuda::make_event(true)),
        stop_(cuda::make_event(true)) {}

  // One timed iteration (ms) after one warm-up iteration, with or without the config. Both are
  // queued behind a host gate: with a config each launch also sets a window attribute, and a
  // measurement that timed the host's enqueue rate would blame that on the cache.
  double sample(bool with_config) {
    apply(with_config);
    cudaStream_t s = gpu_.stream();
    gate_.hold(s);
    try {
      gpu_.run_range(0, kernels_);
      ATL_CUDA_CHECK(cudaEventRecord(start_.get(), s));
      gpu_.run_range(0, kernels_);
      ATL_CUDA_CHECK(cudaEventRecord(stop_.get(), s));
    } catch (...) {
      gate_.release();
      throw;
    }
    gate_.release();
    gpu_.synchronize();
    float ms = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    return ms;
  }

  // Millijoules per iteration over about `window_ms` of back-to-back iterations.
  std::optional<double> energy_per_iteration(NvmlDevice& nvml, bool with_config, double iteration_ms, double window_ms) {
    apply(with_config);
    const int iterations =
        std::clamp(static_cast<int>(std::ceil(window_ms / std::max(iteration_ms, 1e-3))), 1, kMaxEnergyIterations);
    gpu_.run_range(0, kernels_);
    gpu_.synchronize();
    const std::optional<double> before = nvml.energy_mj();
    for (int i = 0; i < iterations; ++i) gpu_.run_range(0, kernels_);
    gpu_.synchronize();
    const std::optional<double> after = nvml.energy_mj();
    if (!before || !after) return std::nullopt;
    return (*after - *before) / iterations;
  }

  int64_t granted() const { return granted_; }

 private:
  // Applying and removing both reset persisting lines: every sample starts from the same state,
  // whatever ran before it.
  void apply(bool with_config) {
    gpu_.set_l2_residency(with_config ? residency_ : nullptr);
    if (with_config) granted_ = gpu_.persisting_l2_limit();
  }

  CudaInstance& gpu_;
  const L2Residency* residency_;
  int kernels_;
  cuda::Event start_, stop_;
  cuda::HostGate gate_;
  int64_t granted_ = 0;
};

void measure_pairs(Evaluator& ev, bool has_config, int pairs, L2Measurement& m) {
  for (int i = 0; i < pairs; ++i) {
    // AB, BA, AB, ...: a linear drift then weighs on both sides equally.
    const bool config_first = (m.baseline_samples_ms.size() % 2) == 1;
    if (config_first) {
      m.config_samples_ms.push_back(ev.sample(has_config));
      m.baseline_samples_ms.push_back(ev.sample(false));
    } else {
      m.baseline_samples_ms.push_back(ev.sample(false));
      m.config_samples_ms.push_back(ev.sample(has_config));
    }
  }
}

}  // namespace

L2Measurement measure_l2(Instance& instance, const l2::ResidencyConfig* config, const l2::L2Device& d,
                         const L2MeasureOptions& options) {
  auto* gpu = dynamic_cast<CudaInstance*>(&instance);
  ATOLL_CHECK(gpu != nullptr, kUnsupported, "L2 measurement needs a CUDA instance; program '{}' is loaded elsewhere",
              instance.program().model);
  ATOLL_CHECK(options.min_pairs >= 2 && options.step_pairs >= 1 && options.max_pairs >= options.min_pairs &&
                  options.target_ci > 0.0,
              kInvalidArgument,
              "L2 measure options: need min_pairs >= 2, step_pairs >= 1, max_pairs >= min_pairs, "
              "target_ci > 0 (got {}, {}, {}, {})",
              options.min_pairs, options.step_pairs, options.max_pairs, options.target_ci);
  std::optional<L2Residency> residency;
  L2Measurement m;
  if (config != nullptr) {
    residency = to_residency(l2::plan_windows(instance.program(), *config, d));
    m.setaside_bytes = residency->setaside_bytes;
  }
  // Whatever an earlier config left persisting would otherwise count for the first samples.
  gpu->set_l2_residency(nullptr);
  Evaluator ev(*gpu, residency ? &*residency : nullptr);
  try {
    int target = options.min_pairs;
    while (true) {
      measure_pairs(ev, residency.has_value(), target - m.pairs, m);
      m.pairs = target;
      std::vector<double> diffs(static_cast<size_t>(m.pairs));
      for (size_t i = 0; i < diffs.size(); ++i) diffs[i] = m.config_samples_ms[i] - m.baseline_samples_ms[i];
      m.baseline_ms = latency_stats(m.baseline_samples_ms).median_ms;
      m.config_ms = latency_stats(m.config_samples_ms).median_ms;
      m.median_diff_ms = latency_stats(diffs).median_ms;
      m.diff_ci_ms = median_ci_half_width(diffs);
      if (m.diff_ci_ms <= options.target_ci * m.baseline_ms || target >= options.max_pairs) break;
      target = std::min(options.max_pairs, target + options.step_pairs);
    }
    m.speedup = m.config_ms > 0 ? m.baseline_ms / m.config_ms : 0.0;
    m.granted_setaside_bytes = ev.granted();
    if (options.energy) {
      int device = 0;
      ATL_CUDA_CHECK(cudaGetDevice(&device));
      NvmlDevice nvml(cuda_pci_bus_id(device));
      m.baseline_energy_mj = ev.energy_per_iteration(nvml, false, m.baseline_ms, options.energy_ms);
      m.config_energy_mj = ev.energy_per_iteration(nvml, residency.has_value(), m.config_ms, options.energy_ms);
      if (!m.baseline_energy_mj || !m.config_energy_mj) {
        m.baseline_energy_mj.reset();
        m.config_energy_mj.reset();
        m.energy_note = nvml.note();
      }
    }
  } catch (...) {
    try {
      gpu->set_l2_residency(nullptr);
    } catch (const Error&) {  // the first failure is the one to report
    }
    throw;
  }
  gpu->set_l2_residency(nullptr);
  return m;
}

int64_t apply_l2_config(Instance& instance, const l2::ResidencyConfig* config, const l2::L2Device& d) {
  auto* gpu = dynamic_cast<CudaInstance*>(&instance);
  ATOLL_CHECK(gpu != nullptr, kUnsupported,
              "an L2 residency config applies on the CUDA device; program '{}' runs elsewhere",
              instance.program().model);
  if (config == nullptr) {
    gpu->set_l2_residency(nullptr);
    return 0;
  }
  const L2Residency r = to_residency(l2::plan_windows(instance.program(), *config, d));
  gpu->set_l2_residency(&r);
  return gpu->persisting_l2_limit();
}

namespace {
bool is_cuda_instance(Instance& instance) {
  return dynamic_cast<CudaInstance*>(&instance) != nullptr;
}
}  // namespace

#else

namespace {
bool is_cuda_instance(Instance& /*instance*/) {
  return false;
}
}  // namespace

int64_t apply_l2_config(Instance& instance, const l2::ResidencyConfig* /*config*/, const l2::L2Device& /*d*/) {
  ATOLL_THROW(kUnsupported,
              "an L2 residency config for '{}' needs the CUDA backend; this atoll was built with ATOLL_CUDA=OFF",
              instance.program().model);
}

L2Measurement measure_l2(Instance& instance, const l2::ResidencyConfig* /*config*/, const l2::L2Device& /*d*/,
                         const L2MeasureOptions& /*options*/) {
  ATOLL_THROW(kUnsupported, "L2 measurement of '{}' needs the CUDA backend; this atoll was built with ATOLL_CUDA=OFF",
              instance.program().model);
}

#endif

CudaL2Evaluator::CudaL2Evaluator(Instance& instance, l2::L2Device d, double hit_ratio, L2MeasureOptions options)
    : ProgramEvaluator(instance.program(), std::move(d), hit_ratio), instance_(instance), options_(options) {
  ATOLL_CHECK(is_cuda_instance(instance), kUnsupported, "the GPU L2 evaluator needs '{}' loaded on the CUDA device",
              instance.program().model);
}

l2::Fitness CudaL2Evaluator::evaluate(const l2::Residency& resident) {
  check_size(resident);
  const bool any = std::find(resident.begin(), resident.end(), true) != resident.end();
  std::optional<l2::ResidencyConfig> c;
  if (any) c = config(resident);
  const L2Measurement m = measure_l2(instance_, c ? &*c : nullptr, device(), options_);
  l2::Fitness f;
  f.time_ms = m.config_ms;
  f.cost = m.baseline_ms > 0 ? 1.0 + m.median_diff_ms / m.baseline_ms : 1.0;
  return f;
}

}  // namespace atl
