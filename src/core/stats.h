#pragma once
// The statistics every benchmark, profiler, evaluator and report uses: nearest-rank quantiles,
// the median, and distribution-free intervals for them. Nothing else in the tree sorts samples.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace atl {

// Nearest-rank q-quantile (q in [0, 1]): the value at or above which a share (1 - q) of the
// samples lie; q = 0 gives the smallest. 0 for no samples.
double quantile(std::vector<double> samples, double q);
// The middle sample, or the mean of the two middle ones. 0 for no samples.
double median(std::vector<double> samples);
// Half the width of a distribution-free 95% interval of the median: order statistics
// n/2 -+ 1.96 sqrt(n)/2. 0 for no samples.
double median_ci_half_width(std::vector<double> samples);

struct Distribution {
  int count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;  // nearest-rank quantiles
  // Distribution-free 95% confidence interval of the p99 (order statistics around rank 0.99 n):
  // what a p99 from this many samples could have been in another run of the same system.
  double p99_low = 0, p99_high = 0;
};
Distribution distribution(std::vector<double> samples);

// The change of a q-quantile between paired samples, a[i] and b[i] being one item measured under
// two conditions (DISB's requests, whose arrivals are the same in every mode): quantile(a) /
// quantile(b) - 1, with a 95% percentile-bootstrap interval from `resamples` resamplings of the
// pairs (seeded, so reproducible). Pairing cancels what both share (in DISB, RT requests queued
// behind other RT requests), which an interval built from two unpaired intervals counts twice.
// All zeros where the samples are empty, of different sizes, or b's quantile is not positive.
struct QuantileChange {
  double change = 0, low = 0, high = 0;
  int pairs = 0;
};
QuantileChange paired_quantile_change(const std::vector<double>& a, const std::vector<double>& b, double q,
                                      int resamples = 2000, uint64_t seed = 1);
// count, mean, p50, p90, p99, p99_9, max and p99_ci ([low, high]): DISB's results.json form.
nlohmann::json distribution_json(const Distribution& d);

}  // namespace atl
