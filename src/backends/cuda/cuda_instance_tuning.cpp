// The CUDA Instance's timing and GEMM tuning: per-kernel times behind a device-side wait, the
// load-time autotuner (with its cross-process cache) and the explicit tile choices.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_instance.h"
#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/timing.h"
#include "backends/cuda/tune_cache.h"
#include "core/error.h"
#include "core/stats.h"

namespace atl::cuda {

namespace {

// Tuning: each alternative runs kTuneLaunches times back to back, best of kAutotuneRepeats.
constexpr int kTuneLaunches = 4;
constexpr int kAutotuneRepeats = 2;
// Device-side wait before timed launches; long enough for the host to queue them all.
constexpr double kSpinBaseUs = 50.0;
constexpr double kSpinPerLaunchUs = 8.0;

std::string choice_name(const GemmChoice& c) {
  if (c.tile == GemmTile::kGemv) return "gemv";
  const char* kernel = gemm_tile_is_pingpong(c.tile) ? "p"
                       : gemm_tile_is_dual(c.tile)     ? "d"
                       : gemm_tile_is_cluster(c.tile)  ? "c"
                       : gemm_tile_is_tma(c.tile)      ? "t"
                       : gemm_tile_is_wgmma(c.tile)    ? "w"
                                                       : "";
  return fmt::format("{}{}x{}/s{}", kernel, gemm_tile_m(c.tile), gemm_tile_n(c.tile), c.splits);
}

// The cache's choice for this kernel's geometry, if it holds one the kernel still offers.
std::optional<GemmChoice> cached_choice(const TuneCache& cache, const KernelLaunch& l,
                                        const std::vector<GemmChoice>& choices) {
  const std::optional<std::string> name = cache.find(l.tune_key());
  if (!name) return std::nullopt;
  for (const GemmChoice& c : choices) {
    if (choice_name(c) == *name) return c;
  }
  return std::nullopt;
}

}  // namespace

std::vector<double> CudaInstanceImpl::time_kernels(int repeats) {
  ATOLL_CHECK(repeats > 0, kInvalidArgument, "repeats must be > 0");
  const size_t n = launches_.size();
  std::vector<Event> marks;
  for (size_t i = 0; i <= n; ++i) marks.push_back(make_event(/*timing=*/true));
  std::vector<std::vector<double>> samples(n);
  cudaStream_t s = stream_.get();
  run_range(0, static_cast<int>(n));  // warm-up: first launches load modules
  for (int r = 0; r < repeats; ++r) {
    launch_spin(s, kSpinBaseUs + kSpinPerLaunchUs * static_cast<double>(n));
    ATL_CUDA_CHECK(cudaEventRecord(marks[0].get(), s));
    for (size_t i = 0; i < n; ++i) {
      launches_[i]->launch(s, run_flag());
      ATL_CUDA_CHECK(cudaEventRecord(marks[i + 1].get(), s));
    }
    synchronize();
    for (size_t i = 0; i < n; ++i) {
      float ms = 0;
      ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, marks[i].get(), marks[i + 1].get()));
      samples[i].push_back(ms);
    }
  }
  std::vector<double> out;
  for (auto& s_i : samples) out.push_back(median(std::move(s_i)));
  return out;
}

double CudaInstanceImpl::time_one(size_t kernel, int repeats) {
  cudaStream_t s = stream_.get();
  Event start = make_event(true), stop = make_event(true);
  launches_[kernel]->launch(s, run_flag());
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    launch_spin(s, kSpinBaseUs + kSpinPerLaunchUs * kTuneLaunches);
    ATL_CUDA_CHECK(cudaEventRecord(start.get(), s));
    for (int i = 0; i < kTuneLaunches; ++i) launches_[kernel]->launch(s, run_flag());
    ATL_CUDA_CHECK(cudaEventRecord(stop.get(), s));
    ATL_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    const double per_launch = ms / kTuneLaunches;
    if (r == 0 || per_launch < best) best = per_launch;
  }
  return best;
}

std::vector<GemmTuneResult> CudaInstanceImpl::tune(int repeats, bool share_by_key, TuneCache* cache) {
  size_t need = workspace_.size();
  for (const auto& l : launches_) {
    for (const GemmChoice& c : l->gemm_choices()) need = std::max(need, l->workspace_bytes_for(c));
  }
  if (need > workspace_.size()) set_workspace(need);
  std::map<std::string, GemmChoice> tuned;
  std::vector<GemmTuneResult> results;
  for (size_t k = 0; k < launches_.size(); ++k) {
    KernelLaunch& l = *launches_[k];
    const std::vector<GemmChoice> choices = l.gemm_choices();
    if (choices.empty()) continue;
    if (share_by_key) {
      if (auto it = tuned.find(l.tune_key()); it != tuned.end()) {
        l.set_gemm_choice(it->second);
        continue;
      }
    }
    if (cache != nullptr) {
      if (const std::optional<GemmChoice> c = cached_choice(*cache, l, choices)) {
        l.set_gemm_choice(*c);
        tuned.emplace(l.tune_key(), *c);
        ++load_tuning_.cached;
        continue;
      }
    }
    GemmTuneResult r;
    r.kernel = static_cast<int>(k);
    const GemmChoice initial = l.gemm_choice();
    r.before = choice_name(initial);
    GemmChoice best = initial;
    double best_ms = 0;
    for (const GemmChoice& c : choices) {
      l.set_gemm_choice(c);
      const double ms = time_one(k, repeats);
      r.candidates_ms.emplace_back(choice_name(c), ms);
      if (c == initial) r.before_ms = ms;
      if (best_ms == 0 || ms < best_ms) {
        best = c;
        best_ms = ms;
      }
    }
    l.set_gemm_choice(best);
    r.after = choice_name(best);
    r.after_ms = best_ms;
    tuned.emplace(l.tune_key(), best);
    if (cache != nullptr) {
      cache->remember(l.tune_key(), r.after);
      ++load_tuning_.timed;
    }
    results.push_back(std::move(r));
  }
  size_t ws = 0;
  for (const auto& l : launches_) ws = std::max(ws, l->workspace_bytes());
  set_workspace(ws);
  return results;
}

void CudaInstanceImpl::autotune_gemms(const TuneSettings& tuning) {
  const auto began = std::chrono::steady_clock::now();
  TuneCache cache(tuning.cache_path, tuning.device_key);
  try {
    cache = TuneCache::load(tuning.cache_path, tuning.device_key);
  } catch (const Error& e) {
    spdlog::warn("{}; tuning without it", e.message());
  }
  // Random operands stand in for activations (timing on zeros or NaN poison flatters kernels);
  // index inputs keep their bytes, and no kernel that reads them is timed here.
  launch_fill_random(arena_.get(), static_cast<int64_t>(arena_.size() / 2), 1, stream_.get());
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const TensorSpec& spec = program_.inputs[i];
    if (spec.dtype != DType::kF16) continue;
    launch_fill_random(io_.bytes_ptr() + input_offsets_[i], spec.shape.numel(), 2, stream_.get());
  }
  tune(kAutotuneRepeats, /*share_by_key=*/true, &cache);
  if (cache.dirty()) {
    try {
      cache.save();
    } catch (const Error& e) {  // a read-only cache folder costs the next load time, nothing else
      spdlog::warn("could not save the GEMM tuning cache: {}", e.message());
    }
  }
  load_tuning_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

std::vector<GemmTuneResult> CudaInstanceImpl::tune_gemms(int repeats) {
  ATOLL_CHECK(repeats > 0, kInvalidArgument, "repeats must be > 0");
  // Realistic operands: the arena holds a real run's activations while kernels are timed.
  run_range(0, static_cast<int>(launches_.size()));
  return tune(repeats, /*share_by_key=*/false);
}

KernelLaunch& CudaInstanceImpl::launch_at(int kernel) const {
  ATOLL_CHECK(kernel >= 0 && kernel < static_cast<int>(launches_.size()), kInvalidArgument,
              "kernel index {} outside [0, {})", kernel, launches_.size());
  return *launches_[static_cast<size_t>(kernel)];
}

std::string CudaInstanceImpl::gemm_choice(int kernel) const {
  const KernelLaunch& l = launch_at(kernel);
  return l.gemm_choices().empty() ? std::string() : choice_name(l.gemm_choice());
}

int CudaInstanceImpl::gemm_choice_count(int kernel) const {
  return static_cast<int>(launch_at(kernel).gemm_choices().size());
}

void CudaInstanceImpl::select_gemm_choice(int kernel, int choice) {
  KernelLaunch& l = launch_at(kernel);
  const std::vector<GemmChoice> choices = l.gemm_choices();
  ATOLL_CHECK(choice >= 0 && choice < static_cast<int>(choices.size()), kInvalidArgument,
              "kernel '{}' has {} GEMM choices, not {}", l.name(), choices.size(), choice);
  const GemmChoice& c = choices[static_cast<size_t>(choice)];
  if (l.workspace_bytes_for(c) > workspace_.size()) set_workspace(l.workspace_bytes_for(c));
  l.set_gemm_choice(c);
  graph_.reset();
  program_graphs_.clear();
}

}  // namespace atl::cuda
