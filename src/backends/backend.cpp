// Default per-kernel timing for backends without device timers; the L2 persistence names.
#include "backends/backend.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/stats.h"

namespace atl {

const char* l2_persist_name(L2Persist p) {
  switch (p) {
    case L2Persist::kWeights:
      return "weights";
    case L2Persist::kArena:
      return "arena";
    case L2Persist::kOff:
      break;
  }
  return "off";
}

L2Persist l2_persist_from_name(std::string_view name) {
  for (const L2Persist p : {L2Persist::kOff, L2Persist::kWeights, L2Persist::kArena}) {
    if (name == l2_persist_name(p)) return p;
  }
  ATOLL_THROW(kInvalidArgument, "unknown L2 persistence '{}' (choices: off, weights, arena)", name);
}

std::vector<double> Instance::kernel_times_ms(int iters) {
  const int n = static_cast<int>(program().kernels.size());
  std::vector<std::vector<double>> samples(static_cast<size_t>(n));
  for (int it = 0; it < std::max(1, iters); ++it) {
    for (int k = 0; k < n; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      run_range(k, k + 1);
      synchronize();
      const auto t1 = std::chrono::steady_clock::now();
      samples[static_cast<size_t>(k)].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  std::vector<double> medians;
  medians.reserve(samples.size());
  for (std::vector<double>& s : samples) medians.push_back(median(std::move(s)));
  return medians;
}

}  // namespace atl
