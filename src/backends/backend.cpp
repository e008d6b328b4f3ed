// Default per-kernel timing for backends without device timers.
#include <algorithm>
#include <chrono>

#include "backends/backend.h"

namespace atl {

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
  std::vector<double> median(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    auto& s = samples[static_cast<size_t>(k)];
    std::nth_element(s.begin(), s.begin() + static_cast<long>(s.size() / 2), s.end());
    median[static_cast<size_t>(k)] = s[s.size() / 2];
  }
  return median;
}

}  // namespace atl
