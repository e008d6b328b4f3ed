// The baselines AutoScratch compares against: random search, and TensorRT's budget heuristic.
#include <algorithm>
#include <cmath>

#include "tune/tuner.h"

namespace atl::tune {

void run_random(Search& s) {
  while (!s.done()) s.evaluate(random_residency(s.rng(), s.slices()));
}

// TensorRT 8.5 style: with a persisting budget of a fraction of the set-aside, the slices most
// reused, soonest first, fill it; the fraction is swept from 0 to 1. Slices no kernel touches are
// never made resident.
void run_heuristic(Search& s) {
  const std::vector<l2::SliceUse> uses = s.evaluator().slice_uses();
  std::vector<size_t> order;
  for (size_t i = 0; i < uses.size(); ++i) {
    if (uses[i].kernels > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (uses[a].kernels != uses[b].kernels) return uses[a].kernels > uses[b].kernels;
    return uses[a].first_kernel < uses[b].first_kernel;
  });
  const int points = std::max(2, s.options().heuristic_points);
  const auto cap = static_cast<double>(std::min<int64_t>(s.evaluator().setaside_slices(), s.slices()));
  size_t previous = 0;  // "none" (fraction 0) is the search's first step already
  for (int i = 1; i < points && !s.done(); ++i) {
    const auto count = std::min(order.size(), static_cast<size_t>(std::lround(cap * i / (points - 1))));
    if (count == previous) continue;
    previous = count;
    Residency r(static_cast<size_t>(s.slices()), false);
    for (size_t j = 0; j < count; ++j) r[order[j]] = true;
    s.evaluate(r);
  }
}

}  // namespace atl::tune
