#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/rng.h"

namespace atl {

namespace {

// Nearest rank on sorted, non-empty samples.
double sorted_quantile(const std::vector<double>& s, double q) {
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(s.size()));
  return s[static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(s.size()))) - 1];
}

}  // namespace

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  return sorted_quantile(samples, q);
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0.0;
  const size_t n = samples.size(), mid = n / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<long>(mid), samples.end());
  if (n % 2 == 1) return samples[mid];
  const double upper = samples[mid];
  return 0.5 * (*std::max_element(samples.begin(), samples.begin() + static_cast<long>(mid)) + upper);
}

double median_ci_half_width(std::vector<double> samples) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  const auto k = static_cast<size_t>(std::max(0.0, std::floor((n - 1.96 * std::sqrt(n)) / 2.0)));
  return 0.5 * (samples[samples.size() - 1 - k] - samples[k]);
}

Distribution distribution(std::vector<double> s) {
  Distribution d;
  if (s.empty()) return d;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  d.count = static_cast<int>(n);
  d.mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  d.p50 = sorted_quantile(s, 0.5);
  d.p90 = sorted_quantile(s, 0.9);
  d.p99 = sorted_quantile(s, 0.99);
  d.p999 = sorted_quantile(s, 0.999);
  d.max = s.back();
  // Ranks n q -+ 1.96 sqrt(n q (1 - q)) bound the q-quantile with 95% confidence (binomial
  // normal approximation), whatever the distribution.
  const double nq = 0.99 * static_cast<double>(n), half = 1.96 * std::sqrt(nq * 0.01);
  auto at_rank = [&](double rank) {  // 1-based rank, clamped to the samples
    return s[static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(n))) - 1];
  };
  d.p99_low = std::min(d.p99, at_rank(std::floor(nq - half)));
  d.p99_high = std::max(d.p99, at_rank(std::ceil(nq + half)));
  return d;
}

QuantileChange paired_quantile_change(const std::vector<double>& a, const std::vector<double>& b, double q,
                                      int resamples, uint64_t seed) {
  QuantileChange c;
  const double base = quantile(b, q);
  if (a.empty() || a.size() != b.size() || base <= 0) return c;
  const size_t n = a.size();
  c.pairs = static_cast<int>(n);
  c.change = quantile(a, q) / base - 1.0;
  const size_t rank = static_cast<size_t>(std::clamp(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(n)), 1.0,
                                                     static_cast<double>(n))) - 1;
  const auto at_rank = [rank](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(rank), v.end());
    return v[rank];
  };
  Rng rng(seed);
  std::vector<double> changes, ra(n), rb(n);
  changes.reserve(static_cast<size_t>(std::max(resamples, 0)));
  for (int r = 0; r < resamples; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(rng.next_u64() % n);
      ra[i] = a[k];
      rb[i] = b[k];
    }
    const double qb = at_rank(rb);
    if (qb > 0) changes.push_back(at_rank(ra) / qb - 1.0);
  }
  if (changes.empty()) {
    c.low = c.high = c.change;
    return c;
  }
  std::sort(changes.begin(), changes.end());
  c.low = std::min(c.change, sorted_quantile(changes, 0.025));
  c.high = std::max(c.change, sorted_quantile(changes, 0.975));
  return c;
}

nlohmann::json distribution_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean},  {"p50", d.p50}, {"p90", d.p90},
          {"p99", d.p99},     {"p99_9", d.p999}, {"max", d.max}, {"p99_ci", {d.p99_low, d.p99_high}}};
}

}  // namespace atl
