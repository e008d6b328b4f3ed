#include "l2/evaluator.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/error.h"

namespace atl::l2 {

std::vector<SliceUse> slice_uses(const Program& p, int64_t slice_bytes) {
  std::vector<SliceUse> uses(static_cast<size_t>(slice_count(p.arena_bytes, slice_bytes)));
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    // A kernel touching a slice through several bindings counts once.
    std::vector<bool> touched(uses.size(), false);
    auto mark = [&](const std::vector<Binding>& bindings) {
      for (const Binding& b : bindings) {
        if (b.kind != Binding::Kind::kArena || b.bytes <= 0) continue;
        const int64_t last = std::min<int64_t>((b.offset + b.bytes - 1) / slice_bytes, uses.size() - 1);
        for (int64_t s = b.offset / slice_bytes; s <= last; ++s) touched[static_cast<size_t>(s)] = true;
      }
    };
    mark(p.kernels[k].inputs);
    mark(p.kernels[k].outputs);
    for (size_t s = 0; s < uses.size(); ++s) {
      if (!touched[s]) continue;
      if (uses[s].first_kernel < 0) uses[s].first_kernel = static_cast<int>(k);
      ++uses[s].kernels;
    }
  }
  return uses;
}

ProgramEvaluator::ProgramEvaluator(Program p, L2Device d, double hit_ratio, int64_t slice_bytes)
    : program_(std::move(p)),
      device_(std::move(d)),
      hit_ratio_(hit_ratio),
      slice_bytes_(slice_bytes),
      slices_(slice_count(program_.arena_bytes, slice_bytes)) {
  device_.validate();
  ATOLL_CHECK(hit_ratio >= 0.0 && hit_ratio <= 1.0, kInvalidArgument, "hit ratio {} outside [0, 1]", hit_ratio);
}

ResidencyConfig ProgramEvaluator::config(const Residency& resident) const {
  check_size(resident);
  return make_config(program_, device_, resident, hit_ratio_, slice_bytes_);
}

void ProgramEvaluator::check_size(const Residency& resident) const {
  ATOLL_CHECK(static_cast<int64_t>(resident.size()) == slices_, kInvalidArgument,
              "residency of {} slices for '{}' batch {}, which has {}", resident.size(), program_.model, program_.batch,
              slices_);
}

SimEvaluator::SimEvaluator(Program p, L2Device d, Policy policy, double hit_ratio, SimOptions options,
                           int64_t slice_bytes)
    : ProgramEvaluator(std::move(p), std::move(d), hit_ratio, slice_bytes),
      policy_(policy),
      options_(options),
      trace_(build_trace(program(), device().line_bytes)) {}

std::string SimEvaluator::name() const {
  return fmt::format("sim ({}, {}, {} hints)", device().name, policy_name(policy_), hint_mode_name(options_.hints));
}

Fitness SimEvaluator::evaluate(const Residency& resident) {
  check_size(resident);
  if (auto it = memo_.find(resident); it != memo_.end()) return it->second;
  const bool any = std::find(resident.begin(), resident.end(), true) != resident.end();
  // No resident slice is no config at all: no set-aside, no windows, as `l2 simulate` without one.
  SimResult r;
  if (any) {
    const ResidencyConfig c = config(resident);
    CacheSimulator sim(CacheGeometry::of(device(), c.setaside_bytes));
    r = sim.run(hinted_trace(trace_, program(), c, device(), options_.hints), policy_, c.hit_ratio, options_);
  } else {
    CacheSimulator sim(CacheGeometry::of(device(), 0));
    r = sim.run(trace_, policy_, 0.0, options_);
  }
  Fitness f;
  f.dram_bytes = r.dram_bytes();
  f.cost = static_cast<double>(f.dram_bytes) / 1048576.0;
  memo_.emplace(resident, f);
  return f;
}

}  // namespace atl::l2
